//! The wire layer against bytes captured from MXNet 1.9.1 nodes, and MXNet's layout rules.

use super::layout::*;
use super::meta::*;
use crate::dtype::DType;
use crate::testutil::unhex as hex;

/// Decodes `frame`, checks that re-encoding gives the same bytes, returns the meta.
fn round_trip(frame: &str) -> Meta {
    let bytes = hex(frame);
    let meta = Meta::decode(&bytes).unwrap();
    assert_eq!(meta.encode(), bytes, "{meta:?}");
    meta
}

#[test]
fn a_workers_registration() {
    let m = round_trip(
        "08ffffffff07 1a1f 0802 121b 0801 10ffffffff07 1a09 3132372e302e302e31 2097d602 2800 \
         5000 2000 2800 3000 4000 50ffffffff07 6000 6800",
    );
    assert_eq!(m.head, EMPTY);
    assert_eq!(m.control.cmd, Command::AddNode);
    assert_eq!(
        m.control.nodes,
        [Node {
            role: Role::Worker,
            id: EMPTY,
            hostname: "127.0.0.1".into(),
            port: 43799,
            is_recovery: false,
            customer_id: 0,
            rsmx_ipc: None,
        }]
    );
    assert_eq!((m.app_id, m.timestamp, m.customer_id), (EMPTY, 0, EMPTY));
    assert!(!m.request && !m.push && !m.pull && !m.simple_app);
}

#[test]
fn barriers_request_and_reply() {
    let m = round_trip("08ffffffff071a04080318072001280030003800400a500060006800");
    assert_eq!(m.control.cmd, Command::Barrier);
    assert_eq!(m.control.barrier_group, ALL);
    assert_eq!((m.request, m.app_id, m.timestamp), (true, 0, 10));
    // The scheduler's reply carries an uninitialised group: a 10-byte negative varint.
    let m =
        round_trip("08ffffffff071a0d080318c0a280a0faffffffff0120002800300038004007500060006800");
    assert_eq!(m.control.barrier_group, -1_543_499_456);
    assert!(!m.request);
}

#[test]
fn push_and_pull() {
    let m = round_trip("0800200128013000380040014a03080b03500060006800");
    assert_eq!(
        (m.head, m.request, m.push, m.pull, m.timestamp),
        (0, true, true, false, 1)
    );
    assert_eq!(
        m.data_type,
        [DataType::Uint64, DataType::Other, DataType::Int32]
    );
    let m = round_trip("080020002801300038004001500060006800");
    assert_eq!((m.request, m.push, m.timestamp), (false, true, 1));
    assert!(m.data_type.is_empty());
    let m = round_trip("0800200128003000380040024a02080b500060016800");
    assert_eq!(
        (m.request, m.push, m.pull, m.timestamp),
        (true, false, true, 2)
    );
    assert_eq!(m.data_type, [DataType::Uint64, DataType::Other]);
    let m = round_trip("0800200028003000380040024a03080b03500060016800");
    assert_eq!((m.request, m.pull), (false, true));
}

#[test]
fn commands_and_terminate() {
    for (frame, request) in [
        ("080320012800300138004000500060006800", true),
        ("080320002800300138004000500060006800", false),
    ] {
        let m = round_trip(frame);
        assert_eq!(
            ServerCommand::from_head(m.head).unwrap(),
            ServerCommand::SyncMode
        );
        assert!(m.simple_app && m.request == request && m.body.is_empty());
    }
    let m = round_trip("080220012800300138004019500060006800");
    assert_eq!(
        ServerCommand::from_head(m.head).unwrap(),
        ServerCommand::StopServer
    );
    assert_eq!(m.timestamp, 25);
    let m = round_trip("08ffffffff071a020801200028003000500060006800");
    assert_eq!(m.control.cmd, Command::Terminate);
    assert_eq!(m.timestamp, EMPTY);
}

#[test]
fn a_body_and_an_ack_are_written_and_unknown_fields_skipped() {
    let m = Meta {
        head: 0,
        body: b"ccopy_reg\n".to_vec(),
        simple_app: true,
        request: true,
        app_id: 0,
        timestamp: 4,
        ..Meta::default()
    };
    assert_eq!(Meta::decode(&m.encode()).unwrap(), m);
    let ack = Meta {
        control: Control {
            cmd: Command::Ack,
            msg_sig: (9 << 40) | (8 << 32) | (4 << 1) | 1,
            ..Control::default()
        },
        ..Meta::default()
    };
    assert_eq!(Meta::decode(&ack.encode()).unwrap(), ack);
    assert_eq!(msg_sig(0, 9, 8, 4, true), ack.control.msg_sig);
    // An absent app id (i32::MAX) keeps its low 16 bits; ids keep their low 8.
    assert_eq!(
        msg_sig(EMPTY, 265, 1, 0, false),
        (0xffff << 48) | (9 << 40) | (1 << 32)
    );
    // rsmx's wire version travels in field 100; other unknown fields are skipped.
    let plain = Meta::decode(&hex("080020002801300038004001500060006800")).unwrap();
    let mut bytes = hex("080020002801300038004001500060006800");
    bytes.extend(hex("a00601"));
    let marked = Meta::decode(&bytes).unwrap();
    assert_eq!(marked.rsmx_wire, Some(WIRE_VERSION));
    assert_eq!(
        Meta {
            rsmx_wire: None,
            ..marked.clone()
        },
        plain
    );
    assert_eq!(Meta::decode(&marked.encode()).unwrap(), marked);
    bytes.extend(hex("b00607"));
    assert_eq!(Meta::decode(&bytes).unwrap(), marked);
    // An rsmx server's reason for refusing a request travels in field 101.
    let refused = Meta {
        rsmx_error: Some("key 3 holds 4 elements".into()),
        ..marked.clone()
    };
    let encoded = refused.encode();
    assert!(encoded.ends_with(&[&hex("aa0616")[..], b"key 3 holds 4 elements"].concat()));
    assert_eq!(Meta::decode(&encoded).unwrap(), refused);
    let lost = Meta {
        control: Control {
            cmd: Command::NodeLost,
            ..Control::default()
        },
        ..Meta::default()
    };
    assert!(lost.debug_string(1, 9, &[]).contains("cmd=NODE_LOST"));
    let err = Meta::decode(&hex("0a05")).unwrap_err().to_string();
    assert!(err.contains("malformed ps-lite meta frame"), "{err}");
}

#[test]
fn ids_ranks_and_groups() {
    assert_eq!(
        (server_id(0), server_id(1), worker_id(0), worker_id(1)),
        (8, 10, 9, 11)
    );
    assert_eq!((rank_of(8), rank_of(11), rank_of(1)), (0, 1, 0));
    assert_eq!(role_of(1), Some(Role::Scheduler));
    assert_eq!(
        (role_of(10), role_of(13)),
        (Some(Role::Server), Some(Role::Worker))
    );
    assert_eq!(role_of(EMPTY), None);
    assert_eq!(group_members(ALL, 2, 2), [9, 11, 8, 10, 1]);
    assert_eq!(group_members(WORKER_GROUP, 2, 3), [9, 11, 13]);
    assert_eq!(group_members(SCHEDULER | SERVER_GROUP, 1, 2), [8, 1]);
    assert_eq!(group_members(9, 2, 2), [9]);
}

#[test]
fn key_ranges() {
    let r = server_key_ranges(2);
    assert_eq!(r[0], 0..0x7fff_ffff_ffff_ffff);
    assert_eq!(r[1].start, 0x7fff_ffff_ffff_ffff);
    let whole = server_key_ranges(1);
    assert_eq!((whole.len(), whole[0].clone()), (1, 0..u64::MAX));
}

#[test]
fn data_heads_are_cantor_pairs() {
    let dense = [0, 2, 5, 9, 14, 20, 27];
    let sparse = [1, 4, 8, 13, 19, 26, 34];
    for (i, d) in DType::ALL[..7].iter().enumerate() {
        assert_eq!(data_head(RequestKind::Dense, *d), dense[i]);
        assert_eq!(data_head(RequestKind::RowSparse, *d), sparse[i]);
        assert_eq!(parse_data_head(dense[i]).unwrap(), (RequestKind::Dense, *d));
        assert_eq!(
            parse_data_head(sparse[i]).unwrap(),
            (RequestKind::RowSparse, *d)
        );
    }
    assert_eq!(data_head(RequestKind::Compressed, DType::F32), 3);
    assert_eq!(
        parse_data_head(3).unwrap(),
        (RequestKind::Compressed, DType::F32)
    );
    for bad in [-1, 6, 35, 10_000] {
        assert!(parse_data_head(bad).is_err(), "{bad}");
    }
    assert!(ServerCommand::from_head(6).is_err());
}

#[test]
fn small_arrays_go_whole_to_one_server_big_ones_are_split() {
    let ranges = server_key_ranges(2);
    for key in 0..6 {
        let parts = dense_parts(key, 10, 4, 2, DEFAULT_BIGARRAY_BOUND);
        let server = (key % 2) as usize;
        assert_eq!(
            parts,
            [Part {
                server,
                ps_key: ranges[server].start + key as u64,
                bytes: 40,
            }]
        );
    }
    // Checked against MXNet: 1,000,003 float32 elements over two servers.
    let parts = dense_parts(3, 1_000_003, 4, 2, DEFAULT_BIGARRAY_BOUND);
    assert_eq!(
        parts.iter().map(|p| p.bytes).collect::<Vec<_>>(),
        [2_000_008, 2_000_004]
    );
    assert_eq!(parts[1].ps_key, ranges[1].start + 3);
    // Halves round away from zero, as C's round (Python's would give 500,000 first).
    let parts = dense_parts(0, 1_000_001, 1, 2, DEFAULT_BIGARRAY_BOUND);
    assert_eq!(parts[0].bytes, 500_001);
    assert_eq!(parts[1].bytes, 500_000);
    let parts = dense_parts(0, 10, 8, 3, 5);
    assert_eq!(
        parts.iter().map(|p| p.bytes / 8).collect::<Vec<_>>(),
        [3, 4, 3]
    );
}

#[test]
fn compressed_keys_are_split_by_their_slots_as_mxnet_does() {
    let ranges = server_key_ranges(2);
    // A small key: one server, the size key holding the element count.
    let parts = compressed_parts(3, 100, 2, DEFAULT_BIGARRAY_BOUND);
    assert_eq!(
        parts,
        [CompressedPart {
            server: 1,
            ps_key: ranges[1].start + 3,
            size_key: ranges[1].start + 100,
            elements: 100,
            compressed_bytes: 28,
        }]
    );
    // 1,000,003 values: 62,501 slots, 31,251 (rounded half up) then the rest.
    let parts = compressed_parts(7, 1_000_003, 2, DEFAULT_BIGARRAY_BOUND);
    let shares: Vec<(usize, usize)> = parts
        .iter()
        .map(|p| (p.elements, p.compressed_bytes / 4))
        .collect();
    assert_eq!(shares, [(500_016, 31_251), (499_987, 31_250)]);
    assert_eq!(parts[0].size_key, ranges[0].start + 500_016);
    assert_eq!(parts[1].ps_key, ranges[1].start + 7);
    // Three servers: the last takes what the rounding left.
    let parts = compressed_parts(0, 100, 3, 10);
    let shares: Vec<(usize, usize)> = parts
        .iter()
        .map(|p| (p.elements, p.compressed_bytes / 4))
        .collect();
    assert_eq!(shares, [(32, 2), (48, 3), (20, 2)]);
}

#[test]
fn two_bit_codes_and_residuals() {
    use super::compress::*;
    let grad = [
        0.6f32, -0.7, 0.1, 0.5, -0.5, 0.0, 0.3, 0.3, 1.2, -0.49, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0,
    ];
    let mut residual = [0.0f32; 17];
    let mut out = vec![0xffu8; compressed_bytes(17)];
    assert_eq!(out.len(), 8);
    quantize_2bit(&grad, &mut residual, 0.5, &mut out);
    // Values 0-3: +, -, 0, + -> 11 10 00 11; 4-7: -, 0, 0, 0 -> 10 00 00 00;
    // 8-11: +, 0, 0, 0 -> 11 00 00 00; 12-15: 0; 16: - -> 10 in the next slot.
    assert_eq!(out, [0xe3, 0x80, 0xc0, 0x00, 0x80, 0, 0, 0]);
    let want_residual = [
        0.6f32 - 0.5,
        -0.7 + 0.5,
        0.1,
        0.0,
        0.0,
        0.0,
        0.3,
        0.3,
        1.2 - 0.5,
        -0.49,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        -1.5,
    ];
    assert_eq!(residual, want_residual);
    let mut back = [9.0f32; 17];
    dequantize_2bit(&out, 0.5, &mut back);
    let mut want = [0.0f32; 17];
    for (i, v) in [
        (0, 0.5),
        (1, -0.5),
        (3, 0.5),
        (4, -0.5),
        (8, 0.5),
        (16, -0.5),
    ] {
        want[i] = v;
    }
    assert_eq!(back, want);
    // The next round sends what the residual has gathered.
    quantize_2bit(&[0.0; 17], &mut residual, 0.5, &mut out);
    assert_eq!(out, [0x00, 0x00, 0xc0, 0x00, 0x80, 0, 0, 0]);
    assert_eq!(residual[16], -1.0);
}

#[test]
fn two_bit_parameters() {
    use super::compress::*;
    assert_eq!(encode_params(0.5), "1,0.500000");
    assert_eq!(decode_params("1,0.500000").unwrap(), 0.5);
    assert!(decode_params("2,0.5")
        .unwrap_err()
        .to_string()
        .contains("unknown gradient compression"));
    for bad in ["", "1", "1,x", "1,-0.5", "1,0", "1,nan"] {
        assert!(decode_params(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_scheduler_numbers_nodes_by_address_once_all_have_come() {
    use super::registry::*;
    let scheduler = Node {
        id: SCHEDULER,
        ..unregistered(Role::Scheduler, "127.0.0.1", 32797, 0)
    };
    let mut reg = Registry::new(1, 2);
    let w_late = unregistered(Role::Worker, "127.0.0.1", 51009, 0);
    let w_early = unregistered(Role::Worker, "127.0.0.1", 47293, 0);
    let s = unregistered(Role::Server, "127.0.0.1", 41036, 0);
    assert!(reg.add(w_late, &scheduler).unwrap().is_none());
    assert!(reg.add(w_early.clone(), &scheduler).unwrap().is_none());
    let err = reg.add(w_early, &scheduler).unwrap_err().to_string();
    assert!(err.contains("one Worker too many"), "{err}");
    let nodes = reg.add(s, &scheduler).unwrap().unwrap();
    // As in MXNet's transcript: server 8 :41036, worker 9 :47293, worker 11 :51009.
    let ids: Vec<_> = nodes.iter().map(|n| (n.id, n.port)).collect();
    assert_eq!(ids, [(8, 41036), (9, 47293), (11, 51009), (1, 32797)]);

    // Host names sort descending before ports.
    let mut reg = Registry::new(0, 3);
    let mut last = None;
    for (host, port) in [("10.0.0.1", 5), ("10.0.0.2", 9), ("10.0.0.1", 3)] {
        last = reg
            .add(unregistered(Role::Worker, host, port, 0), &scheduler)
            .unwrap();
    }
    let order: Vec<_> = last
        .unwrap()
        .iter()
        .map(|n| (n.hostname.clone(), n.port, n.id))
        .collect();
    assert_eq!(
        order,
        [
            ("10.0.0.2".to_string(), 9, 9),
            ("10.0.0.1".to_string(), 3, 11),
            ("10.0.0.1".to_string(), 5, 13),
            ("127.0.0.1".to_string(), 32797, 1),
        ]
    );
    let err = Registry::new(0, 1)
        .add(unregistered(Role::Scheduler, "h", 1, 0), &scheduler)
        .unwrap_err()
        .to_string();
    assert!(err.contains("a second scheduler at h:1"), "{err}");
}

#[test]
fn barriers_release_each_group_when_all_members_asked() {
    use super::registry::*;
    let mut b = Barriers::new(2, 2);
    assert_eq!(b.request(WORKER_GROUP).unwrap(), None);
    assert_eq!(b.request(ALL).unwrap(), None);
    assert_eq!(b.request(WORKER_GROUP).unwrap(), Some(vec![9, 11]));
    // Counted again from zero.
    assert_eq!(b.request(WORKER_GROUP).unwrap(), None);
    for _ in 0..3 {
        assert_eq!(b.request(ALL).unwrap(), None);
    }
    assert_eq!(b.request(ALL).unwrap(), Some(vec![9, 11, 8, 10, 1]));
    assert_eq!(b.request(SCHEDULER).unwrap(), Some(vec![1]));
    assert!(b.request(0).is_err() && b.request(8).is_err());
}

#[test]
fn messages_print_as_ps_lite_prints_them() {
    let m = Meta::decode(&hex("0800200128013000380040014a03080b03500060006800")).unwrap();
    assert_eq!(
        m.debug_string(9, 8, &[8, 24, 4]),
        "9 => 8. Meta: request=1, timestamp=1, app_id=0, customer_id=0, simple_app=0, \
         push=1, head=0, data_type={ UINT64 OTHER INT32 } Body: data_size=8 data_size=24 \
         data_size=4"
    );
    let m = Meta::decode(&hex(
        "08ffffffff07 1a1f 0802 121b 0801 10ffffffff07 1a09 3132372e302e302e31 2097d602 2800 \
         5000 2000 2800 3000 4000 50ffffffff07 6000 6800",
    ))
    .unwrap();
    assert_eq!(
        m.debug_string(EMPTY, 1, &[]),
        "? => 1. Meta: request=0, timestamp=0, control={ cmd=ADD_NODE, node={ role=worker, \
         ip=127.0.0.1, port=43799, is_recovery=0 } }"
    );
    let m = Meta::decode(&hex(
        "08ffffffff071a04080318072001280030003800400a500060006800",
    ))
    .unwrap();
    assert_eq!(
        m.debug_string(9, 1, &[]),
        "9 => 1. Meta: request=1, timestamp=10, control={ cmd=BARRIER, barrier_group=7 }"
    );
}

#[test]
fn key_value_frames_round_trip_and_refuse_bad_sizes() {
    use super::kv::*;
    let push = KvPairs {
        keys: vec![5],
        vals: vec![0; 24],
        lens: vec![24],
    };
    let frames = push.frames();
    assert_eq!(
        frames.iter().map(Vec::len).collect::<Vec<_>>(),
        [8, 24, 4],
        "as in MXNet's push"
    );
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    assert_eq!(KvPairs::from_frames(&refs).unwrap(), push);
    let pull = KvPairs {
        keys: vec![5],
        ..KvPairs::default()
    };
    assert_eq!(
        pull.frames().iter().map(Vec::len).collect::<Vec<_>>(),
        [8, 0]
    );
    assert_eq!(KvPairs::from_frames(&[]).unwrap(), KvPairs::default());
    for bad in [
        vec![&[0u8; 7][..], &[][..]],
        vec![&[0u8; 8][..], &[][..], &[0u8; 3][..]],
        vec![&[0u8; 16][..], &[][..], &[0u8; 4][..]],
        vec![&[0u8; 8][..]],
    ] {
        let err = KvPairs::from_frames(&bad).unwrap_err().to_string();
        assert!(err.contains("malformed key-value message"), "{err}");
    }
}

#[test]
fn requests_are_sliced_by_server_range_and_pulls_joined_in_key_order() {
    use super::kv::*;
    let ranges = server_key_ranges(2);
    let b = ranges[1].start;
    let send = KvPairs {
        keys: vec![3, 7, b + 1],
        vals: (0u8..12).collect(),
        lens: vec![2, 4, 6],
    };
    let parts = slice(&send, &ranges).unwrap();
    let first = parts[0].as_ref().unwrap();
    let second = parts[1].as_ref().unwrap();
    assert_eq!(
        (first.keys.clone(), first.lens.clone()),
        (vec![3, 7], vec![2, 4])
    );
    assert_eq!(first.vals, (0u8..6).collect::<Vec<_>>());
    assert_eq!(
        (second.keys.clone(), second.vals.clone()),
        (vec![b + 1], (6u8..12).collect())
    );
    // Without lengths every key has the same share; a server without keys gets nothing.
    let even = KvPairs {
        keys: vec![b, b + 2],
        vals: vec![1, 2, 3, 4],
        lens: vec![],
    };
    let parts = slice(&even, &ranges).unwrap();
    assert!(parts[0].is_none());
    assert_eq!(parts[1].as_ref().unwrap().vals, [1, 2, 3, 4]);
    for bad in [
        KvPairs {
            keys: vec![7, 3],
            ..KvPairs::default()
        },
        KvPairs {
            keys: vec![1, 2],
            vals: vec![0; 3],
            lens: vec![],
        },
        KvPairs {
            keys: vec![1],
            vals: vec![0; 3],
            lens: vec![4],
        },
        KvPairs {
            keys: vec![u64::MAX],
            vals: vec![],
            lens: vec![0],
        },
    ] {
        assert!(slice(&bad, &ranges).is_err(), "{bad:?}");
    }

    // Replies come in any order and are joined by first key.
    let replies = vec![
        KvPairs {
            keys: vec![b + 1],
            vals: vec![9; 6],
            lens: vec![6],
        },
        KvPairs {
            keys: vec![3, 7],
            vals: vec![1, 1, 2, 2, 2, 2],
            lens: vec![2, 4],
        },
    ];
    let joined = join_pull(&send.keys, replies.clone(), true).unwrap();
    assert_eq!(joined.keys, send.keys);
    assert_eq!(joined.vals, [1, 1, 2, 2, 2, 2, 9, 9, 9, 9, 9, 9]);
    assert_eq!(joined.lens, [2, 4, 6]);
    let err = join_pull(&send.keys, replies[..1].to_vec(), true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("did not ask for"), "{err}");
    let err = join_pull(&send.keys, replies[1..].to_vec(), true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("a pull of 3 keys got answers for 2"), "{err}");
    let stray = vec![KvPairs {
        keys: vec![4],
        vals: vec![0; 2],
        lens: vec![2],
    }];
    assert!(join_pull(&[3], stray, true).is_err());
}
