//! The seeds of the fuzz targets: real frames of every kind, encoded by the real encoders
//! with the values a running cluster sends (every request, reply and event variant, every
//! peer message, handshakes made by both real sides, pager answers made by the real pager
//! loop), and scripts of real use of the shared pages. `tests/fuzz_smoke.rs` runs them;
//! its ignored test `write_seeds` writes them under `fuzz/seeds/<target>/`.

use super::{CONN, SEG};
use crate::transport::tcp::fuzzing::{captured_handshake, captured_pager, BOUND};
use remora_proto::link::*;
use remora_proto::*;

/// The seeds of `target`, named.
pub fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    match target {
        "client_requests" => {
            named(requests().into_iter().map(|(n, r)| (n, frame(&RequestFrame { id: 41, req: r }))))
        }
        "client_replies" => named(server_msgs().into_iter().map(|(n, m)| (n, frame(&m)))),
        "peer_handshake" => handshakes(),
        "peer_frames" => peer_frames(),
        "bulk_frames" => bulk(),
        "pager_stream" => pager(),
        "scif_ring" => super::scripts::rings(),
        "dma_page" => super::scripts::dma(),
        "intr_page" => super::scripts::intr(),
        "cluster_file" => clusters(),
        "ofi_messages" => crate::transport::ofi::fuzzing::seeds(),
        _ => Vec::new(),
    }
}

fn named(it: impl Iterator<Item = (&'static str, Vec<u8>)>) -> Vec<(String, Vec<u8>)> {
    it.map(|(n, b)| (n.to_string(), b)).collect()
}

fn frame<T: serde::Serialize>(m: &T) -> Vec<u8> {
    encode(m).expect("a seed encodes")
}

/// A control frame on a TCP flow: length, then the frame.
fn wire(m: &LinkMsg) -> Vec<u8> {
    let body = frame(m);
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

fn bulk_head(op: BulkOp, tag: u64, conn: u64, offset: u64, len: u64, ok: bool) -> Vec<u8> {
    let h = BulkHeader { op, tag, conn, offset, len, ok };
    zerocopy::IntoBytes::as_bytes(&BulkFrame::from_header(&h)).to_vec()
}

fn requests() -> Vec<(&'static str, Request)> {
    let acl = Some(vec![
        AccessEntry { node: 8, perm: PERM_READ | PERM_WRITE },
        AccessEntry { node: 12, perm: PERM_READ },
    ]);
    let ask = ViplAsk {
        disc: b"vipl-server".to_vec(),
        from_disc: b"client-7".to_vec(),
        info: vec![3; 96],
        timeout_ms: Some(5000),
    };
    vec![
        ("hello", Request::Hello { version: VERSION, role: Role::Client }),
        ("hello_peer", Request::Hello { version: VERSION, role: Role::Peer { node: 8 } }),
        ("hello_scif", Request::Hello { version: VERSION, role: Role::Scif }),
        (
            "create_segment",
            Request::CreateSegment { id: Some(1200), size: 1 << 20, private: false, empty: false },
        ),
        (
            "create_segment_auto_empty",
            Request::CreateSegment { id: None, size: 65536, private: true, empty: true },
        ),
        ("attach_memory", Request::AttachMemory { seg: SEG }),
        ("prepare", Request::Prepare { seg: SEG, adapter: 0 }),
        ("set_available", Request::SetAvailable { seg: SEG, adapter: 0 }),
        (
            "set_unavailable",
            Request::SetUnavailable { seg: SEG, adapter: 0, force_disconnect: true, notify: true },
        ),
        ("remove_segment", Request::RemoveSegment { seg: SEG, force: false }),
        ("share_segment", Request::ShareSegment { seg: SEG }),
        ("segment_events", Request::SegmentEvents { seg: SEG }),
        ("take_segment_events", Request::TakeSegmentEvents { seg: SEG }),
        ("attach_shared", Request::AttachShared { id: 1200 }),
        ("connect", Request::Connect { node: 8, id: 1200, timeout_ms: Some(2000) }),
        ("disconnect", Request::Disconnect { conn: CONN }),
        (
            "map_note",
            Request::MapNote {
                map: 3,
                target: MapTarget::Remote { conn: CONN },
                offset: 4096,
                size: 8192,
                readonly: true,
            },
        ),
        ("unmap_note", Request::UnmapNote { map: 3 }),
        ("probe", Request::Probe { node: 12 }),
        ("create_interrupt", Request::CreateInterrupt { intno: Some(7), data: true, shared: false }),
        ("remove_interrupt", Request::RemoveInterrupt { intr: 0x3_0000_0001 }),
        ("connect_interrupt", Request::ConnectInterrupt { node: 8, intno: 7, data: false, timeout_ms: None }),
        ("disconnect_interrupt", Request::DisconnectInterrupt { intr: 0x3_0000_0002 }),
        ("create_dma_queue", Request::CreateDmaQueue { max_entries: 64 }),
        ("remove_dma_queue", Request::RemoveDmaQueue { queue: 0x4_0000_0001 }),
        ("status", Request::Status),
        ("shutdown", Request::Shutdown),
        ("seg_read", Request::SegRead { conn: CONN, offset: 8192, len: 4096 }),
        (
            "seg_write",
            Request::SegWrite {
                conn: CONN,
                runs: vec![(0, vec![0xab; 64]), (4000, b"tail of the page".to_vec())],
            },
        ),
        (
            "trigger_interrupt",
            Request::TriggerInterrupt { intr: 0x3_0000_0002, data: Some(b"wake up".to_vec()) },
        ),
        ("dsm_flow", Request::DsmFlow { conn: CONN }),
        ("dsm_flows", Request::DsmFlows { conns: vec![CONN, CONN + 1], watch: Some((0, 4096)) }),
        ("interrupt_flows", Request::InterruptFlows { intr: 0x3_0000_0001 }),
        ("scif_bind", Request::Scif(ScifRequest::Bind { port: 2050, privileged: false })),
        ("scif_listen", Request::Scif(ScifRequest::Listen { backlog: 16 })),
        (
            "scif_connect",
            Request::Scif(ScifRequest::Connect { node: 8, port: 2050, from_node: 4, from_port: 2051 }),
        ),
        (
            "scif_connect_without_flow",
            Request::Scif(ScifRequest::ConnectWithoutFlow {
                node: 8,
                port: 2050,
                from_node: 4,
                from_port: 2051,
            }),
        ),
        ("scif_accept", Request::Scif(ScifRequest::Accept { port: 2050, token: 9, sync: true })),
        (
            "scif_register",
            Request::Scif(ScifRequest::Register {
                offset: 0x10_0000,
                prot: 3,
                fixed: true,
                pieces: vec![
                    ScifPiece { fd: 0, memfd_offset: 0, len: 8192 },
                    ScifPiece { fd: 1, memfd_offset: 4096, len: 57344 },
                ],
            }),
        ),
        ("scif_unregister", Request::Scif(ScifRequest::Unregister { offset: 0x10_0000, len: 65536 })),
        ("scif_windows", Request::Scif(ScifRequest::Windows { peer: true, from: 0 })),
        ("scif_close", Request::Scif(ScifRequest::Close)),
        (
            "scif_remote_write",
            Request::Scif(ScifRequest::RemoteWrite { offset: 0x10_0040, data: vec![7; 256] }),
        ),
        (
            "scif_remote_check",
            Request::Scif(ScifRequest::RemoteCheck { offset: 0x10_0000, len: 4096, prot: 1 }),
        ),
        ("scif_remote_read", Request::Scif(ScifRequest::RemoteRead { offset: 0x10_0000, len: 4096 })),
        ("scif_nodes", Request::Scif(ScifRequest::Nodes)),
        ("scif_pager_flow", Request::Scif(ScifRequest::PagerFlow)),
        ("scif_peer_rma_counts", Request::Scif(ScifRequest::PeerRmaCounts { until: Some(17) })),
        ("rsm_create", Request::Rsm(RsmRequest::Create { mode: 0o600, signal: 3 })),
        ("rsm_publish", Request::Rsm(RsmRequest::Publish { seg: SEG, id: 0x4000_0001, acl: acl.clone() })),
        ("rsm_republish", Request::Rsm(RsmRequest::Republish { seg: SEG, acl })),
        ("rsm_unpublish", Request::Rsm(RsmRequest::Unpublish { seg: SEG })),
        ("rsm_destroy", Request::Rsm(RsmRequest::Destroy { seg: SEG })),
        (
            "rsm_connect",
            Request::Rsm(RsmRequest::Connect {
                node: 8,
                id: 0x4000_0001,
                perm: PERM_READ,
                signal: 5,
                creds: Some(Credentials { uid: 1000, gid: 100 }),
            }),
        ),
        ("rsm_importers", Request::Rsm(RsmRequest::Importers { seg: SEG })),
        (
            "vipl_wait",
            Request::Vipl(ViplRequest::Wait { disc: b"vipl-server".to_vec(), timeout_ms: Some(10_000) }),
        ),
        ("vipl_request", Request::Vipl(ViplRequest::Request { node: 8, ask })),
        ("vipl_accept", Request::Vipl(ViplRequest::Accept { conn: CONN, info: vec![1; 80] })),
        ("vipl_reject", Request::Vipl(ViplRequest::Reject { conn: CONN })),
        ("group_leg_ready", Request::GroupLegReady { conn: CONN, leg: CONN + 1 }),
    ]
}

fn server_msgs() -> Vec<(&'static str, ServerMsg)> {
    let ok = |id, r| ServerMsg::Reply { id, result: Ok(r) };
    let err = |e| ServerMsg::Reply { id: 41, result: Err(e) };
    let status = NodeStatus {
        node: 4,
        pid: 3120,
        uptime_s: 86_400,
        sessions: vec![SessionStatus { session: 1, pid: 4000, role: Role::Client }],
        segments: vec![SegmentStatus {
            seg: SEG,
            id: Some(1200),
            size: 1 << 20,
            owner: 1,
            state: "available".into(),
            importers: 2,
            shared: false,
        }],
        connections: vec![ConnectionStatus {
            conn: CONN,
            session: 1,
            node: 8,
            id: 1200,
            size: 1 << 20,
            alive: true,
        }],
        maps: vec![MapStatus {
            session: 1,
            map: 3,
            target: MapTarget::Local { seg: SEG },
            offset: 0,
            size: 4096,
            readonly: false,
        }],
        interrupts: vec![(0x3_0000_0001, 7, true, 12)],
        dma_queues: vec![(0x4_0000_0001, 1, 64)],
        peers: vec![PeerStatus {
            node: 8,
            addr: "10.0.0.2:7400".into(),
            state: "up".into(),
            rtt_us: 85,
            bytes_in: 1 << 30,
            bytes_out: 1 << 29,
        }],
        scif: (2, 1, 1),
        dma_bytes: 1 << 32,
        dma_jobs: 1000,
        ..NodeStatus::default()
    };
    vec![
        ("ok", ok(41, Reply::Ok)),
        ("hello", ok(1, Reply::Hello { node: 4 })),
        (
            "segment",
            ok(
                41,
                Reply::Segment { seg: SEG, id: Some(1200), size: 1 << 20, prepared: true, available: false },
            ),
        ),
        ("connected", ok(41, Reply::Connected { conn: CONN, size: 1 << 20 })),
        (
            "group_connected",
            ok(41, Reply::GroupConnected { conn: CONN, size: 1 << 20, legs: vec![CONN + 1, CONN + 2] }),
        ),
        ("probe", ok(41, Reply::Probe { reachable: true })),
        ("status", ok(41, Reply::Status(Box::new(status)))),
        ("interrupt", ok(41, Reply::Interrupt { intr: 0x3_0000_0001, intno: 7 })),
        ("data", ok(41, Reply::Data((0..4096).map(|i| i as u8).collect()))),
        ("dma_queue", ok(41, Reply::DmaQueue { queue: 0x4_0000_0001 })),
        ("scif_port", ok(41, Reply::ScifPort { port: 2050 })),
        ("scif_listening", ok(41, Reply::ScifListening { token: 9 })),
        (
            "scif_connected",
            ok(41, Reply::ScifConnected { side: 1, remote: true, peer_node: 8, peer_port: 2051 }),
        ),
        ("scif_dial_direct", ok(41, Reply::ScifDialDirect)),
        ("scif_offset", ok(41, Reply::ScifOffset { offset: 0x10_0000 })),
        (
            "scif_windows",
            ok(
                41,
                Reply::ScifWindows {
                    windows: vec![
                        ScifWindow {
                            offset: 0x10_0000,
                            len: 65536,
                            prot: 3,
                            pieces: vec![
                                ScifPiece { fd: 0, memfd_offset: 0, len: 8192 },
                                ScifPiece { fd: 0, memfd_offset: 4096, len: 57344 },
                            ],
                        };
                        3
                    ],
                    more: true,
                },
            ),
        ),
        ("scif_nodes", ok(41, Reply::ScifNodes(vec![0, 4, 8, 12]))),
        ("rsm_published", ok(41, Reply::RsmPublished { id: 0x4000_0001 })),
        (
            "rsm_connected",
            ok(41, Reply::RsmConnected { conn: CONN, size: 1 << 20, signal: 5, writable: true }),
        ),
        ("rsm_signals", ok(41, Reply::RsmSignals(vec![(8, 5), (12, 6)]))),
        (
            "vipl_incoming",
            ok(
                41,
                Reply::ViplIncoming { conn: CONN, node: 8, disc: b"vipl-server".to_vec(), info: vec![3; 96] },
            ),
        ),
        ("vipl_accepted", ok(41, Reply::ViplAccepted(vec![1; 80]))),
        ("dsm_flow", ok(41, Reply::DsmFlow { remote: CONN, size: 1 << 20 })),
        ("dsm_flows", ok(42, Reply::DsmFlows { remotes: vec![CONN, CONN + 1] })),
        (
            "interrupt_flows",
            ok(43, Reply::InterruptFlows { gen: 3, conns: vec![CONN, CONN + 2], nodes: vec![8, 12] }),
        ),
        ("err_no_such_segment", err(Error::NoSuchSegment)),
        ("err_timeout", err(Error::Timeout)),
        ("err_illegal_parameter", err(Error::IllegalParameter("size 0".into()))),
        ("err_system", err(Error::System("Cannot allocate memory (os error 12)".into()))),
        ("err_protocol", err(Error::Protocol("protocol version 4, this side speaks 5".into()))),
        ("err_rejected", err(Error::Rejected)),
        ("event_segment_connected", ServerMsg::Event(Event::SegmentConnected { seg: SEG, node: 8 })),
        ("event_segment_disconnected", ServerMsg::Event(Event::SegmentDisconnected { seg: SEG, node: 8 })),
        ("event_segment_unavailable", ServerMsg::Event(Event::SegmentUnavailable { conn: CONN })),
        (
            "event_segment_link",
            ServerMsg::Event(Event::SegmentLink { seg: SEG, node: 8, operational: false }),
        ),
        ("event_connection_link", ServerMsg::Event(Event::ConnectionLink { conn: CONN, operational: true })),
        ("event_segment_lost", ServerMsg::Event(Event::SegmentLost { seg: SEG, node: 8 })),
        ("event_segment_events_on", ServerMsg::Event(Event::SegmentEventsOn { seg: SEG })),
        (
            "event_connection_lost",
            ServerMsg::Event(Event::ConnectionLost { conn: CONN, reason: LostReason::NodeGone }),
        ),
        ("event_group_leg", ServerMsg::Event(Event::GroupLeg { conn: CONN, leg: CONN + 1, joined: true })),
        (
            "events_together",
            ServerMsg::Events(vec![
                Event::ConnectionLost { conn: CONN, reason: LostReason::OwnerGone },
                Event::ConnectionLost { conn: CONN + 1, reason: LostReason::OwnerGone },
            ]),
        ),
    ]
}

fn handshakes() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let flows = [
        ("control", Flow::Control),
        ("bulk", Flow::Bulk),
        ("pager", Flow::Pager),
        ("bulk_lane", Flow::BulkLane(1)),
    ];
    for (name, flow) in flows {
        if let Ok((dialer, listener)) = captured_handshake(flow) {
            out.push((format!("dialer_{name}"), dialer));
            out.push((format!("listener_{name}"), listener));
        }
    }
    let refused = LinkMsg::Refused { reason: "node 8 is not in the cluster file".into() };
    let hello = |version, to, features| LinkMsg::Hello {
        version,
        node: 8,
        to,
        flow: Flow::Control,
        nonce: [9; 32],
        incarnation: 77,
        features,
        kernel: 0x1234_5678_9abc_def0,
    };
    out.push(("refused".into(), wire(&refused)));
    out.push(("hello_other_version".into(), wire(&hello(VERSION + 1, 4, crate::FEATURE_INTR_PAIR))));
    out.push(("hello_other_node".into(), wire(&hello(VERSION, 12, crate::FEATURE_INTR_PAIR))));
    // A node whose cluster file turns the interrupt pairing off says no feature.
    out.push(("hello_without_pairing".into(), wire(&hello(VERSION, 4, 0))));
    // A later node's word: bits this node gives no meaning (ignored), a multi-byte varint.
    out.push(("hello_future_bits".into(), wire(&hello(VERSION, 4, 0x8000_0001))));
    out
}

fn peer_frames() -> Vec<(String, Vec<u8>)> {
    let req = |id, req| LinkMsg::Request { id, origin: 5, req };
    let reply = |result| LinkMsg::Reply { id: 17, result };
    let ask = ViplAsk {
        disc: b"vipl-server".to_vec(),
        from_disc: b"client-7".to_vec(),
        info: vec![3; 96],
        timeout_ms: None,
    };
    let msgs = [
        ("ping", LinkMsg::Ping { seq: 1000 }),
        ("pong", LinkMsg::Pong { seq: 1000 }),
        ("welcome", LinkMsg::Welcome),
        ("session_end", LinkMsg::SessionEnd { origin: 5 }),
        ("pager_bind", LinkMsg::PagerBind { target: RangeRef::connection(CONN) }),
        ("pager_bind_registered", LinkMsg::PagerBind { target: RangeRef::registered(9) }),
        (
            "pager_bind_many",
            LinkMsg::PagerBindMany {
                targets: vec![RangeRef::connection(CONN), RangeRef::connection(CONN + 1)],
                watch: Some((CONN, 4096)),
            },
        ),
        ("flow_bind", LinkMsg::FlowBind { key: 3, token: 0x5eed_f10e_70ce_0001 }),
        (
            "event",
            LinkMsg::Event {
                origin: 5,
                event: Event::ConnectionLost { conn: CONN, reason: LostReason::OwnerGone },
            },
        ),
        ("connect", req(17, PeerRequest::Connect { id: 1200, timeout_ms: Some(2000) })),
        ("disconnect", req(18, PeerRequest::Disconnect { conn: CONN })),
        ("connect_group", req(18, PeerRequest::ConnectGroup { group: 3 })),
        ("group_members", req(18, PeerRequest::GroupMembers { group: 3, joined: Some(8), left: Some(8) })),
        (
            "connect_interrupt",
            req(19, PeerRequest::ConnectInterrupt { intno: 7, data: true, timeout_ms: None }),
        ),
        ("disconnect_interrupt", req(20, PeerRequest::DisconnectInterrupt { intr: 0x3_0000_0002 })),
        ("trigger", req(21, PeerRequest::Trigger { intr: 0x3_0000_0002, data: Some(b"wake up".to_vec()) })),
        ("probe", req(22, PeerRequest::Probe)),
        ("read", req(23, PeerRequest::Read { conn: CONN, offset: 4096, len: 4096 })),
        (
            "write",
            req(24, PeerRequest::Write { conn: CONN, runs: vec![(0, vec![1; 64]), (128, vec![2; 32])] }),
        ),
        (
            "scif_connect",
            req(25, PeerRequest::Scif(ScifPeerRequest::Connect { port: 2050, from: (4, 2051), conn: 3 })),
        ),
        (
            "scif_connect_without_flow",
            req(
                25,
                PeerRequest::Scif(ScifPeerRequest::ConnectWithoutFlow {
                    port: 2050,
                    from: (4, 2051),
                    conn: 3,
                }),
            ),
        ),
        (
            "scif_data",
            req(26, PeerRequest::Scif(ScifPeerRequest::Data { conn: 3, data: b"a scif message".to_vec() })),
        ),
        ("scif_close", req(27, PeerRequest::Scif(ScifPeerRequest::Close { conn: 3 }))),
        (
            "scif_write",
            req(
                28,
                PeerRequest::Scif(ScifPeerRequest::Write { conn: 3, offset: 0x10_0000, data: vec![9; 200] }),
            ),
        ),
        (
            "scif_check",
            req(
                29,
                PeerRequest::Scif(ScifPeerRequest::Check { conn: 3, offset: 0x10_0000, len: 4096, prot: 3 }),
            ),
        ),
        (
            "scif_read",
            req(30, PeerRequest::Scif(ScifPeerRequest::Read { conn: 3, offset: 0x10_0000, len: 512 })),
        ),
        (
            "scif_rma_counts",
            req(40, PeerRequest::Scif(ScifPeerRequest::RmaCounts { conn: 3, until: Some(17) })),
        ),
        ("scif_credit", req(41, PeerRequest::Scif(ScifPeerRequest::Credit { conn: 3, bytes: 48 * 1024 }))),
        (
            "rsm_connect",
            req(
                31,
                PeerRequest::Rsm(RsmPeerRequest::Connect {
                    id: 0x4000_0001,
                    perm: PERM_READ,
                    creds: Credentials { uid: 1000, gid: 100 },
                    signal: 5,
                }),
            ),
        ),
        ("vipl_request", req(32, PeerRequest::Vipl(ViplPeerRequest::Request(ask)))),
        ("reply_ok", reply(Ok(PeerReply::Ok))),
        ("reply_connected", reply(Ok(PeerReply::Connected { conn: CONN, size: 1 << 20 }))),
        (
            "reply_group_connected",
            reply(Ok(PeerReply::GroupConnected { conn: CONN, size: 1 << 20, memory: 0x1234_5678_9abc })),
        ),
        ("reply_data", reply(Ok(PeerReply::Data(vec![0x5a; 4096])))),
        (
            "reply_interrupt",
            reply(Ok(PeerReply::Interrupt { intr: 0x3_0000_0002, intno: 7, owner: 0x1_0000_0003 })),
        ),
        ("reply_scif_accepted", reply(Ok(PeerReply::Scif(ScifPeerReply::Accepted { conn: 3, port: 2050 })))),
        (
            "reply_scif_accepted_direct",
            reply(Ok(PeerReply::Scif(ScifPeerReply::AcceptedDirect { conn: 3, port: 2050, token: 0x70ce }))),
        ),
        (
            "reply_rsm_connected",
            reply(Ok(PeerReply::RsmConnected { conn: CONN, size: 1 << 20, signal: 5, writable: false })),
        ),
        ("reply_vipl_accepted", reply(Ok(PeerReply::ViplAccepted(vec![1; 80])))),
        ("reply_error", reply(Err(Error::NoSuchSegment))),
        ("pager_bind_interrupt", LinkMsg::PagerBind { target: RangeRef::interrupt(11) }),
        ("session_end_noted", LinkMsg::SessionEndNoted { origin: 5 }),
        ("gave_up", LinkMsg::GaveUp { id: 17 }),
        ("gave_up_noted", LinkMsg::GaveUpNoted { id: 17 }),
    ];
    let mut out: Vec<(String, Vec<u8>)> = msgs.iter().map(|(n, m)| (n.to_string(), wire(m))).collect();
    // A stretch of a live link: heartbeats around a request and its answer.
    let live: Vec<u8> =
        [&msgs[0].1, &msgs[7].1, &msgs[1].1, &msgs[24].1, &msgs[3].1].iter().flat_map(|m| wire(m)).collect();
    out.push(("live_link".into(), live));
    out
}

/// A pager flow's requests: reads of a page, of both pieces, out of range; stores with
/// and without an acknowledgement.
fn pager_requests() -> Vec<(&'static str, Vec<u8>)> {
    let write = |tag, offset, len: usize, ok| {
        let mut f = bulk_head(BulkOp::Write, tag, BOUND, offset, len as u64, ok);
        f.extend((0..len).map(|i| (i % 241) as u8));
        f
    };
    let trigger = |tag, len: usize, ok| {
        let mut f = bulk_head(BulkOp::Trigger, tag, BOUND, 0, len as u64, ok);
        f.extend((0..len).map(|i| i as u8));
        f
    };
    vec![
        ("read_page", bulk_head(BulkOp::Read, 1, BOUND, 4096, 4096, true)),
        ("read_across_pieces", bulk_head(BulkOp::Read, 2, BOUND, 28 << 10, 8192, true)),
        ("read_outside", bulk_head(BulkOp::Read, 3, BOUND, 60 << 10, 8192, true)),
        ("write_acked", write(4, 8192, 4096, true)),
        ("write_flush", write(5, 0, 512, false)),
        ("write_refused", write(6, 63 << 10, 2048, true)),
        ("other_handle", bulk_head(BulkOp::Read, 7, BOUND + 1, 0, 4096, true)),
        ("data_frame", bulk_head(BulkOp::Data, 8, BOUND, 0, 0, true)),
        ("trigger_posted", bulk_head(BulkOp::Trigger, 9, BOUND, 0, 0, false)),
        ("trigger_data_waited", trigger(10, 9, true)),
        ("trigger_refused", trigger(11, 7, false)),
        ("trigger_full", trigger(12, 1022, true)),
        ("trigger_too_long", trigger(13, 1025, true)),
    ]
}

fn pager() -> Vec<(String, Vec<u8>)> {
    let reqs = pager_requests();
    let mut out: Vec<(String, Vec<u8>)> = reqs.iter().map(|(n, b)| (n.to_string(), b.clone())).collect();
    let session: Vec<u8> = reqs[..6].iter().flat_map(|(_, b)| b.clone()).collect();
    out.push(("session".into(), session));
    out
}

fn bulk() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    // The answers a pager loop really gave, as a pager (or a trigger's flow) reads them (a
    // posted trigger's refusal ends the flow unanswered).
    let answered =
        |n: &str| !["other_handle", "data_frame", "trigger_too_long", "trigger_refused"].contains(&n);
    for (n, req) in pager_requests().into_iter().filter(|(n, _)| answered(n)) {
        out.push((format!("answer_{n}"), captured_pager(&req)));
    }
    let mut write = bulk_head(BulkOp::Write, 100, CONN, 1 << 20, 4096, true);
    write.extend(vec![0x77; 4096]);
    out.push(("dma_write".into(), write));
    out.push(("dma_read".into(), bulk_head(BulkOp::Read, 101, CONN, 0, MAX_BULK_CHUNK as u64, true)));
    out.push(("dma_ack".into(), bulk_head(BulkOp::Ack, 100, CONN, 1 << 20, 0, true)));
    out.push(("dma_nack".into(), bulk_head(BulkOp::Ack, 102, CONN, 1 << 20, 0, false)));
    out
}

fn clusters() -> Vec<(String, Vec<u8>)> {
    let two = "secret = \"0123456789abcdef-cluster\"\nheartbeat_ms = 200\nforce_tcp = false\n\n[[node]]\nid = 4\nhost = \"10.0.0.1\"\nport = 7400\n\n[[node]]\nid = 8\nhost = \"10.0.0.2\"\nport = 7400\n";
    let file = "secret_file = \"secret\"\n[[node]]\nid = 4\nhost = \"node-a.example\"\nport = 7400\n";
    let many: String = std::iter::once(
        "secret = \"a much longer secret for a big cluster\"\nforce_tcp = true\n".to_string(),
    )
    .chain(
        (1..=16)
            .map(|i| format!("[[node]]\nid = {}\nhost = \"192.168.1.{i}\"\nport = {}\n", i * 4, 7400 + i)),
    )
    .collect();
    let inline = "secret = '0123456789abcdef'\nnode = [ { id = 4, host = \"::1\", port = 7400 }, { id = 8, host = \"::1\", port = 7401 } ]\n";
    let dup = "secret = \"0123456789abcdef\"\n[[node]]\nid = 4\nhost = \"a\"\nport = 1\n[[node]]\nid = 4\nhost = \"b\"\nport = 2\n";
    let unknown = "secret = \"0123456789abcdef\"\n[[node]]\nid = 4\nhost = \"a\"\nport = 1\nweight = 3\n";
    [
        ("two_nodes", two),
        ("secret_file", file),
        ("sixteen_nodes", &many),
        ("inline_tables", inline),
        ("duplicate_id", dup),
        ("unknown_field", unknown),
    ]
    .iter()
    .map(|(n, t)| (n.to_string(), t.as_bytes().to_vec()))
    .collect()
}
