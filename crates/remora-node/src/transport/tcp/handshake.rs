//! The handshake of every flow: both sides prove they know the cluster secret (HMAC-SHA256
//! over both nonces, both node ids and both `intr_pair` settings), the listener checks the
//! dialer is a node of the cluster and that it is the node asked for. MACs are compared in
//! constant time. Each side notes the other's `intr_pair` (`Env::pairing`) once the other's
//! proof checked.

use super::framing::{read_frame, write_frame};
use crate::transport::Env;
use hmac::{Hmac, Mac};
use remora_proto::link::{Flow, LinkMsg};
use remora_proto::VERSION;
use sha2::Sha256;
use std::io::{Read, Write};

/// What a handshake's MAC covers besides its label and nonces: both nodes and both
/// `intr_pair` settings, the dialer's first.
#[derive(Clone, Copy)]
struct Sides {
    dialer: u32,
    listener: u32,
    pair: [bool; 2],
}

fn mac_state(secret: &[u8], label: &[u8], a: &[u8; 32], b: &[u8; 32], sides: Sides) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes any key length");
    m.update(label);
    m.update(a);
    m.update(b);
    m.update(&sides.dialer.to_le_bytes());
    m.update(&sides.listener.to_le_bytes());
    m.update(&[u8::from(sides.pair[0]), u8::from(sides.pair[1])]);
    m
}

fn mac(secret: &[u8], label: &[u8], a: &[u8; 32], b: &[u8; 32], sides: Sides) -> [u8; 32] {
    mac_state(secret, label, a, b, sides).finalize().into_bytes().into()
}

/// Whether `given` is the MAC of these inputs, compared in constant time (a timing
/// difference must not tell a forger how many leading bytes were right).
fn mac_ok(given: &[u8; 32], secret: &[u8], label: &[u8], a: &[u8; 32], b: &[u8; 32], sides: Sides) -> bool {
    mac_state(secret, label, a, b, sides).verify_slice(given).is_ok()
}

/// Whether this node's cluster file allows the interrupt pairing.
fn pairs(me: &Env) -> bool {
    me.cluster.as_ref().is_some_and(|c| c.intr_pair)
}

pub(super) fn nonce() -> [u8; 32] {
    let mut n = [0u8; 32];
    let _ = rustix::rand::getrandom(&mut n, rustix::rand::GetRandomFlags::empty());
    n
}

pub(super) fn refuse(s: &mut impl Write, why: String) -> std::io::Error {
    let _ = write_frame(s, &LinkMsg::Refused { reason: why.clone() });
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, why)
}

/// The dialer's side of the handshake as steps, so a blocking stream ([`dial_handshake`])
/// and an asynchronous one (`pool.rs`, `handshaken_async`) run the same protocol.
pub(in crate::transport) struct Dialer<'a> {
    me: &'a Env,
    to: u32,
    mine: [u8; 32],
}

impl<'a> Dialer<'a> {
    /// A handshake of this node with node `to`, with a fresh nonce.
    pub(in crate::transport) fn new(me: &'a Env, to: u32) -> Dialer<'a> {
        Dialer { me, to, mine: nonce() }
    }

    /// The first frame: who we are, whom we want, for which flow.
    pub(in crate::transport) fn hello(&self, flow: Flow) -> LinkMsg {
        LinkMsg::Hello {
            version: VERSION,
            node: self.me.node,
            to: self.to,
            flow,
            nonce: self.mine,
            incarnation: self.me.incarnation,
            intr_pair: pairs(self.me),
        }
    }

    /// The listener's answer to the hello: the frame to send back (our proof) and the
    /// peer's incarnation; or the error, with the refusal to send first when there is one.
    pub(in crate::transport) fn challenged(
        &self,
        answer: LinkMsg,
    ) -> Result<(LinkMsg, u64), (Option<LinkMsg>, std::io::Error)> {
        let Some(cluster) = self.me.cluster.as_ref() else {
            return Err((None, std::io::Error::other("no cluster file: no secret to prove who we are")));
        };
        let secret = &cluster.secret;
        let (me, to) = (self.me.node, self.to);
        let refused = |why: String| {
            (
                Some(LinkMsg::Refused { reason: why.clone() }),
                std::io::Error::new(std::io::ErrorKind::PermissionDenied, why),
            )
        };
        match answer {
            LinkMsg::Challenge { node, nonce: theirs, incarnation, intr_pair, mac: m } => {
                if node != to {
                    return Err(refused(format!("expected node {to}, answered by node {node}")));
                }
                let sides = Sides { dialer: me, listener: to, pair: [pairs(self.me), intr_pair] };
                if !mac_ok(&m, secret, b"remora-listener", &self.mine, &theirs, sides) {
                    return Err(refused(format!("node {to} failed authentication")));
                }
                self.me.pairing.note(to, intr_pair);
                Ok((
                    LinkMsg::Auth { mac: mac(secret, b"remora-dialer", &theirs, &self.mine, sides) },
                    incarnation,
                ))
            }
            LinkMsg::Refused { reason } => {
                Err((None, std::io::Error::new(std::io::ErrorKind::PermissionDenied, reason)))
            }
            other => Err((None, std::io::Error::other(format!("unexpected {other:?}")))),
        }
    }

    /// The listener's last frame: welcome, or why not.
    pub(in crate::transport) fn welcomed(answer: LinkMsg) -> std::io::Result<()> {
        match answer {
            LinkMsg::Welcome => Ok(()),
            LinkMsg::Refused { reason } => {
                Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, reason))
            }
            other => Err(std::io::Error::other(format!("unexpected {other:?}"))),
        }
    }
}

/// Dialer side of the handshake (blocking; a TCP stream, or bytes in a fuzz target).
/// Returns the peer's incarnation.
pub(in crate::transport) fn dial_handshake(
    s: &mut (impl Read + Write),
    me: &Env,
    to: u32,
    flow: Flow,
) -> std::io::Result<u64> {
    let d = Dialer::new(me, to);
    write_frame(s, &d.hello(flow))?;
    let (auth, incarnation) = match d.challenged(read_frame::<LinkMsg>(s)?) {
        Ok(x) => x,
        Err((refusal, e)) => {
            if let Some(r) = refusal {
                let _ = write_frame(s, &r);
            }
            return Err(e);
        }
    };
    write_frame(s, &auth)?;
    Dialer::welcomed(read_frame::<LinkMsg>(s)?)?;
    Ok(incarnation)
}

/// Listener side of the handshake (blocking; a TCP stream, or bytes in a fuzz target).
/// Returns (node, flow, incarnation, what `admit` gave).
///
/// `admit` gives the listener's link with the authenticated node, or why it keeps none. It
/// is asked before the welcome, so a dialer this transport does not link with is refused in
/// the handshake, with the reason, instead of welcomed and then hung up on: the dialer
/// would take its link for up, then for broken, at each redial.
pub(in crate::transport) fn accept_handshake<A>(
    s: &mut (impl Read + Write),
    me: &Env,
    admit: impl FnOnce(u32) -> Result<A, String>,
) -> std::io::Result<(u32, Flow, u64, A)> {
    let cluster = me.cluster.as_ref().expect("tcp needs a cluster");
    let (node, to, flow, theirs, incarnation, their_pair) = match read_frame::<LinkMsg>(s)? {
        LinkMsg::Hello { version, node, to, flow, nonce, incarnation, intr_pair } => {
            if version != VERSION {
                return Err(refuse(s, format!("protocol version {version}, this node speaks {VERSION}")));
            }
            (node, to, flow, nonce, incarnation, intr_pair)
        }
        other => return Err(refuse(s, format!("expected a hello, got {other:?}"))),
    };
    if to != me.node {
        return Err(refuse(s, format!("this is node {}, not node {to}", me.node)));
    }
    if cluster.addr(node).is_none() {
        return Err(refuse(s, format!("node {node} is not in the cluster file")));
    }
    let mine = nonce();
    let sides = Sides { dialer: node, listener: me.node, pair: [their_pair, pairs(me)] };
    let m = mac(&cluster.secret, b"remora-listener", &theirs, &mine, sides);
    write_frame(
        s,
        &LinkMsg::Challenge {
            node: me.node,
            nonce: mine,
            incarnation: me.incarnation,
            intr_pair: sides.pair[1],
            mac: m,
        },
    )?;
    match read_frame::<LinkMsg>(s)? {
        LinkMsg::Auth { mac: m } if mac_ok(&m, &cluster.secret, b"remora-dialer", &mine, &theirs, sides) => {
            let link = admit(node).map_err(|why| refuse(s, why))?;
            me.pairing.note(node, their_pair);
            write_frame(s, &LinkMsg::Welcome)?;
            Ok((node, flow, incarnation, link))
        }
        LinkMsg::Auth { .. } => Err(refuse(s, format!("node {node} failed authentication"))),
        other => Err(refuse(s, format!("expected auth, got {other:?}"))),
    }
}
