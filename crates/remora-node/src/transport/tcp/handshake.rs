//! The handshake of every flow: both sides prove they know the cluster secret (HMAC-SHA256
//! over both nonces, both node ids, both nodes' feature words and both kernels), the
//! listener checks the dialer is a node of the cluster and that it is the node asked for.
//! MACs are compared in constant time. Each side notes the other's feature word, and
//! whether the other's kernel word is its own (`Env::peer_features`), once the other's proof
//! checked; what the word's bits mean is the node's, and the kernels tell a link within one
//! machine (`tcp/mod.rs`'s `tune_congestion`). A kernel word is keyed with the cluster's
//! secret and its sender's nonce ([`kernel_word`]): a stranger who sends a hello, or reads
//! one, cannot tell from the words which nodes share a machine, nor when one rebooted.

use super::framing::{read_frame, write_frame};
use crate::transport::Env;
use hmac::{Hmac, Mac};
use remora_proto::link::{Flow, LinkMsg};
use remora_proto::VERSION;
use sha2::Sha256;
use std::io::{Read, Write};

/// What a handshake's MAC covers besides its label and nonces: both nodes, both feature
/// words and both kernels, the dialer's first.
#[derive(Clone, Copy)]
struct Sides {
    dialer: u32,
    listener: u32,
    features: [u32; 2],
    kernels: [u64; 2],
}

fn mac_state(secret: &[u8], label: &[u8], a: &[u8; 32], b: &[u8; 32], sides: Sides) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes any key length");
    m.update(label);
    m.update(a);
    m.update(b);
    m.update(&sides.dialer.to_le_bytes());
    m.update(&sides.listener.to_le_bytes());
    m.update(&sides.features[0].to_le_bytes());
    m.update(&sides.features[1].to_le_bytes());
    m.update(&sides.kernels[0].to_le_bytes());
    m.update(&sides.kernels[1].to_le_bytes());
    m
}

/// The kernel word a side whose nonce is `nonce` says in a cluster with `secret`: the first
/// 8 bytes of HMAC-SHA256(secret, "remora-kernel" ‖ nonce ‖ kernel id). The other side
/// computes the word its own kernel would give with that nonce and compares: equal only
/// on one machine, and, with a fresh nonce each handshake, never the same word twice. `0`
/// where the kernel does not say its id (never equal to a peer's then).
pub(super) fn kernel_word(secret: &[u8], nonce: &[u8; 32]) -> u64 {
    let id = remora_sys::flow::kernel_id();
    if id == 0 {
        return 0;
    }
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes any key length");
    m.update(b"remora-kernel");
    m.update(nonce);
    m.update(&id.to_le_bytes());
    let out = m.finalize().into_bytes();
    u64::from_le_bytes(out[..8].try_into().expect("8 bytes")).max(1)
}

/// Whether the peer whose nonce is `nonce` said, in `theirs`, the word this node's kernel
/// gives with that nonce (neither unsaid).
fn same_kernel(secret: &[u8], nonce: &[u8; 32], theirs: u64) -> bool {
    let mine = kernel_word(secret, nonce);
    mine != 0 && mine == theirs
}

fn mac(secret: &[u8], label: &[u8], a: &[u8; 32], b: &[u8; 32], sides: Sides) -> [u8; 32] {
    mac_state(secret, label, a, b, sides).finalize().into_bytes().into()
}

/// Whether `given` is the MAC of these inputs, compared in constant time (a timing
/// difference must not tell a forger how many leading bytes were right).
fn mac_ok(given: &[u8; 32], secret: &[u8], label: &[u8], a: &[u8; 32], b: &[u8; 32], sides: Sides) -> bool {
    mac_state(secret, label, a, b, sides).verify_slice(given).is_ok()
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
            features: self.me.features,
            kernel: self.me.cluster.as_ref().map_or(0, |c| kernel_word(&c.secret, &self.mine)),
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
            LinkMsg::Challenge { node, nonce: theirs, incarnation, features, kernel, mac: m } => {
                if node != to {
                    return Err(refused(format!("expected node {to}, answered by node {node}")));
                }
                let sides = Sides {
                    dialer: me,
                    listener: to,
                    features: [self.me.features, features],
                    kernels: [kernel_word(secret, &self.mine), kernel],
                };
                if !mac_ok(&m, secret, b"remora-listener", &self.mine, &theirs, sides) {
                    return Err(refused(format!("node {to} failed authentication")));
                }
                self.me.peer_features.note(to, features, same_kernel(secret, &theirs, kernel));
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
    let (node, to, flow, theirs, incarnation, their_features, their_kernel) = match read_frame::<LinkMsg>(s)?
    {
        LinkMsg::Hello { version, node, to, flow, nonce, incarnation, features, kernel } => {
            if version != VERSION {
                return Err(refuse(s, format!("protocol version {version}, this node speaks {VERSION}")));
            }
            (node, to, flow, nonce, incarnation, features, kernel)
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
    let kernel = kernel_word(&cluster.secret, &mine);
    let sides = Sides {
        dialer: node,
        listener: me.node,
        features: [their_features, me.features],
        kernels: [their_kernel, kernel],
    };
    let m = mac(&cluster.secret, b"remora-listener", &theirs, &mine, sides);
    write_frame(
        s,
        &LinkMsg::Challenge {
            node: me.node,
            nonce: mine,
            incarnation: me.incarnation,
            features: me.features,
            kernel,
            mac: m,
        },
    )?;
    match read_frame::<LinkMsg>(s)? {
        LinkMsg::Auth { mac: m } if mac_ok(&m, &cluster.secret, b"remora-dialer", &mine, &theirs, sides) => {
            let link = admit(node).map_err(|why| refuse(s, why))?;
            me.peer_features.note(node, their_features, same_kernel(&cluster.secret, &theirs, their_kernel));
            write_frame(s, &LinkMsg::Welcome)?;
            Ok((node, flow, incarnation, link))
        }
        LinkMsg::Auth { .. } => Err(refuse(s, format!("node {node} failed authentication"))),
        other => Err(refuse(s, format!("expected auth, got {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    //! Both MACs cover both feature words and both kernels: either changed on the way (by
    //! anyone without the secret) fails the handshake, and nothing is noted of the peer.
    use super::*;
    use std::io::ErrorKind;
    use std::os::unix::net::UnixStream;

    const SECRET: &[u8] = b"handshake-test-secret-0123456789";
    /// The words the two sides say (any bits: the transport does not read them).
    const DIALER_WORD: u32 = 0b101;
    const LISTENER_WORD: u32 = 0b011;

    /// What the side the test plays says: its feature word, and whether its kernel word is
    /// this machine's (else another's).
    type Said = (u32, bool);

    fn env(node: u32, features: u32) -> Env {
        super::super::fuzzing::loopback_env(node, SECRET, features)
    }

    /// The kernel word a side with `nonce` says in the test's cluster: this machine's, or
    /// (`here` false) another's.
    fn word(nonce: &[u8; 32], here: bool) -> u64 {
        kernel_word(SECRET, nonce) ^ u64::from(!here)
    }

    /// Node 8 dials node 4, whose side the test plays by hand: its challenge says `said`,
    /// under a MAC over `signed`.
    fn dial_against(said: Said, signed: Said) -> (std::io::Result<u64>, LinkMsg, Env) {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let dialer = std::thread::spawn(move || {
            let me = env(8, DIALER_WORD);
            (dial_handshake(&mut a, &me, 4, Flow::Control), me)
        });
        let LinkMsg::Hello { nonce: theirs, features, kernel, .. } = read_frame::<LinkMsg>(&mut b).unwrap()
        else {
            panic!("a hello first")
        };
        assert_eq!((features, kernel), (DIALER_WORD, word(&theirs, true)), "the hello says both words");
        let nonce = nonce();
        let sides = Sides {
            dialer: 8,
            listener: 4,
            features: [DIALER_WORD, signed.0],
            kernels: [kernel, word(&nonce, signed.1)],
        };
        let m = mac(SECRET, b"remora-listener", &theirs, &nonce, sides);
        let challenge = LinkMsg::Challenge {
            node: 4,
            nonce,
            incarnation: 3,
            features: said.0,
            kernel: word(&nonce, said.1),
            mac: m,
        };
        write_frame(&mut b, &challenge).unwrap();
        let answer = read_frame::<LinkMsg>(&mut b).unwrap();
        if matches!(answer, LinkMsg::Auth { .. }) {
            write_frame(&mut b, &LinkMsg::Welcome).unwrap();
        }
        let (dialed, me) = dialer.join().unwrap();
        (dialed, answer, me)
    }

    /// The word is keyed: another secret gives another word for this machine, and the word
    /// is not the kernel id itself.
    #[test]
    fn the_kernel_word_depends_on_the_secret_and_the_nonce() {
        let (a, b) = (nonce(), nonce());
        assert_ne!(kernel_word(SECRET, &a), 0);
        assert_eq!(kernel_word(SECRET, &a), kernel_word(SECRET, &a), "stable");
        assert_ne!(kernel_word(SECRET, &a), kernel_word(SECRET, &b), "another nonce");
        assert_ne!(kernel_word(SECRET, &a), kernel_word(b"another-cluster-secret-0123456789", &a));
        assert_ne!(kernel_word(SECRET, &a), remora_sys::flow::kernel_id());
    }

    #[test]
    fn the_dialer_refuses_a_challenge_whose_word_or_kernel_was_changed() {
        // As signed: accepted, and the listener's word and kernel noted.
        let (dialed, answer, me) = dial_against((LISTENER_WORD, true), (LISTENER_WORD, true));
        assert_eq!(dialed.unwrap(), 3);
        assert!(matches!(answer, LinkMsg::Auth { .. }), "{answer:?}");
        assert_eq!(me.peer_features.of(4), LISTENER_WORD);
        assert!(me.peer_features.same_kernel(4));
        // Another machine's kernel, as signed: accepted, and not this kernel.
        let (dialed, _, me) = dial_against((LISTENER_WORD, false), (LISTENER_WORD, false));
        assert_eq!(dialed.unwrap(), 3);
        assert!(!me.peer_features.same_kernel(4));
        // One bit of the word, or of the kernel, flipped after signing: refused, nothing noted.
        for said in [(LISTENER_WORD ^ 1, true), (LISTENER_WORD, false)] {
            let (dialed, answer, me) = dial_against(said, (LISTENER_WORD, true));
            assert_eq!(dialed.unwrap_err().kind(), ErrorKind::PermissionDenied);
            assert!(matches!(answer, LinkMsg::Refused { .. }), "{answer:?}");
            assert_eq!(me.peer_features.of(4), 0);
            assert!(!me.peer_features.same_kernel(4));
        }
    }

    /// Node 4 listens; node 8's side is played by hand: its hello says `said`, and its
    /// proof is a MAC over `signed`.
    fn accept_from(said: Said, signed: Said) -> (std::io::Result<(u32, Flow, u64)>, LinkMsg, Env) {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let listener = std::thread::spawn(move || {
            let me = env(4, LISTENER_WORD);
            (accept_handshake(&mut a, &me, |_| Ok(())).map(|(n, f, i, ())| (n, f, i)), me)
        });
        let nonce = nonce();
        let hello = LinkMsg::Hello {
            version: VERSION,
            node: 8,
            to: 4,
            flow: Flow::Bulk,
            nonce,
            incarnation: 5,
            features: said.0,
            kernel: word(&nonce, said.1),
        };
        write_frame(&mut b, &hello).unwrap();
        let LinkMsg::Challenge { nonce: theirs, features, kernel, .. } =
            read_frame::<LinkMsg>(&mut b).unwrap()
        else {
            panic!("a challenge")
        };
        assert_eq!((features, kernel), (LISTENER_WORD, word(&theirs, true)), "the challenge says both words");
        let sides = Sides {
            dialer: 8,
            listener: 4,
            features: [signed.0, LISTENER_WORD],
            kernels: [word(&nonce, signed.1), kernel],
        };
        write_frame(&mut b, &LinkMsg::Auth { mac: mac(SECRET, b"remora-dialer", &theirs, &nonce, sides) })
            .unwrap();
        let last = read_frame::<LinkMsg>(&mut b).unwrap();
        let (accepted, me) = listener.join().unwrap();
        (accepted, last, me)
    }

    #[test]
    fn the_listener_refuses_a_hello_whose_word_or_kernel_was_changed() {
        // As signed: welcomed, and the dialer's word and kernel noted.
        let (accepted, last, me) = accept_from((DIALER_WORD, true), (DIALER_WORD, true));
        assert_eq!(accepted.unwrap(), (8, Flow::Bulk, 5));
        assert_eq!(last, LinkMsg::Welcome);
        assert_eq!(me.peer_features.of(8), DIALER_WORD);
        assert!(me.peer_features.same_kernel(8));
        // The hello's word or kernel changed on the way (the dialer signed the one it sent).
        for said in [(DIALER_WORD ^ 1, true), (DIALER_WORD, false)] {
            let (accepted, last, me) = accept_from(said, (DIALER_WORD, true));
            assert_eq!(accepted.unwrap_err().kind(), ErrorKind::PermissionDenied);
            assert!(matches!(last, LinkMsg::Refused { .. }), "{last:?}");
            assert_eq!(me.peer_features.of(8), 0);
        }
    }
}
