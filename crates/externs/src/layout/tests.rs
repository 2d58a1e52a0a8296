//! Tests of argument layouts: building them from fields and constants, reading and writing bits.
use super::*;

#[test]
fn constants_fields_and_pad_bits_land_where_the_bit_string_has_them() {
    // 4 pad bits, a 4-bit constant, a 16-bit field, a 3-bit field, a 5-bit constant: 28 bits in
    // 4 bytes
    let parts = [
        Part::Const {
            value: 0xa,
            width: 4,
        },
        Part::Field { slot: 0, width: 16 },
        Part::Field { slot: 1, width: 3 },
        Part::Const {
            value: 0x11,
            width: 5,
        },
    ];
    let l = ArgLayout::new(28, &parts).expect("layout");
    assert_eq!((l.width(), l.nbytes()), (28, 4));
    assert_eq!(l.constant(), None);
    let mut slots = vec![0xbeef, 0b101];
    let mut out = vec![0u8; 4];
    l.read(&slots, &mut out);
    // 0000 1010 | 1011 1110 1110 1111 | 101 | 10001
    assert_eq!(out, [0x0a, 0xbe, 0xef, 0xb1]);
    slots.fill(0);
    l.write(&[0x0f, 0x12, 0x34, 0x5f], &mut slots);
    assert_eq!(slots, [0x1234, 0b010]);
    // a resized buffer writes nothing
    l.write(&[1, 2, 3], &mut slots);
    assert_eq!(slots, [0x1234, 0b010]);
}

#[test]
fn constants_only_and_bad_shapes() {
    let l = ArgLayout::new(8, &[Part::Const { value: 4, width: 8 }]).unwrap();
    assert_eq!(l.constant(), Some(&[4u8][..]));
    // a 72-bit field off the byte grid, and parts that do not add up
    let off_grid = [
        Part::Const { value: 0, width: 4 },
        Part::Field { slot: 0, width: 72 },
        Part::Const { value: 0, width: 4 },
    ];
    assert!(ArgLayout::new(80, &off_grid).is_none());
    assert!(
        ArgLayout::new(76, &off_grid[..2]).is_some(),
        "4 pad bits put the wide field back on the grid"
    );
    assert!(ArgLayout::new(16, &[Part::Field { slot: 0, width: 8 }]).is_none());
    assert!(ArgLayout::new(8, &[Part::Field { slot: 0, width: 16 }]).is_none());
}

/// The argument's own bytes compare equal; any one bit flipped in any byte, or one byte short,
/// does not.
fn assert_equals_exactly(l: &ArgLayout, slots: &[u64]) -> Vec<u8> {
    let mut b = vec![0u8; l.nbytes()];
    l.read(slots, &mut b);
    assert!(l.equals(slots, &b));
    for i in 0..b.len() {
        for bit in [0x01, 0x40] {
            let mut c = b.clone();
            c[i] ^= bit;
            assert!(!l.equals(slots, &c), "byte {i} bit {bit:#x}");
        }
    }
    assert!(!l.equals(slots, &b[1..]));
    b
}

#[test]
fn equals_compares_field_by_field() {
    let parts = [
        Part::Field { slot: 0, width: 48 },
        Part::Field { slot: 1, width: 48 },
        Part::Field { slot: 2, width: 16 },
        Part::Field {
            slot: 3,
            width: 128,
        },
    ];
    let l = ArgLayout::new(240, &parts).unwrap();
    let slots = vec![
        0x0102_0304_0506,
        0x0708_090a_0b0c,
        0x0d0e,
        0x1f1e_1d1c_1b1a_1918,
        0x1716_1514_1312_1110,
    ];
    assert_eq!(
        l.windows.as_ref().map(|w| w.len()),
        Some(5),
        "a 128-bit field is compared as two words"
    );
    assert_equals_exactly(&l, &slots);
    // fields of at most 8 whole bytes only (an Ethernet header): compared through their windows
    let eth = ArgLayout::new(112, &parts[..3]).unwrap();
    assert!(eth.windows.is_some());
    let e = assert_equals_exactly(&eth, &slots);
    assert!(!eth.equals(&slots[..2], &e), "too few slots");
    // with a constant and pad bits: the whole string is compared
    let k = ArgLayout::new(
        12,
        &[
            Part::Const { value: 5, width: 4 },
            Part::Field { slot: 0, width: 8 },
        ],
    )
    .unwrap();
    let mut kb = [0u8; 2];
    k.read(&[0xab], &mut kb);
    assert!(k.equals(&[0xab], &kb) && !k.equals(&[0xac], &kb));
    assert_eq!(l.single_field(), None);
    assert_eq!(
        ArgLayout::new(
            128,
            &[Part::Field {
                slot: 7,
                width: 128
            }]
        )
        .unwrap()
        .single_field(),
        Some(7)
    );
    assert_eq!(
        ArgLayout::new(64, &[Part::Field { slot: 2, width: 64 }])
            .unwrap()
            .single_field(),
        Some(2)
    );
    assert_eq!(k.single_field(), None);
}

/// Fields off the byte grid in an argument of 8 bytes or more move through 8-byte windows (an
/// IPv4 header: version and IHL, flags and fragment offset); the bits land where the bit string
/// has them, and `clear` is a write of zeros.
#[test]
fn fields_off_the_byte_grid_move_through_windows() {
    let widths = [4u32, 4, 8, 16, 16, 3, 13, 8, 8, 16, 32, 32];
    let parts: Vec<Part> = widths
        .iter()
        .enumerate()
        .map(|(i, w)| Part::Field {
            slot: i as u32,
            width: *w,
        })
        .collect();
    let l = ArgLayout::new(160, &parts).unwrap();
    assert!(
        l.ops.iter().all(|op| !matches!(op, FieldOp::Bits { .. })),
        "{:?}",
        l.ops
    );
    assert!(l.covered && l.windows.is_some());
    // the bytes of a header and its fields read bit by bit
    let hdr: Vec<u8> = (0..20u8).map(|i| i.wrapping_mul(73) ^ 0xa5).collect();
    let mut bit = 0usize;
    let fields: Vec<u64> = widths
        .iter()
        .map(|w| {
            let v = read_bits(&hdr, bit, *w);
            bit += *w as usize;
            v
        })
        .collect();
    let mut slots = vec![0u64; 12];
    l.write(&hdr, &mut slots);
    assert_eq!(slots, fields);
    let mut out = [0xffu8; 20];
    l.read(&slots, &mut out);
    assert_eq!(&out[..], &hdr[..]);
    assert!(l.equals(&slots, &hdr));
    let mut other = hdr.clone();
    other[6] ^= 0x20; // a flag bit
    assert!(!l.equals(&slots, &other));
    // `clear` leaves what a write of zeros leaves
    let mut zeroed = slots.clone();
    l.write(&[0u8; 20], &mut zeroed);
    l.clear(&mut slots);
    assert_eq!(slots, zeroed);
    assert!(slots.iter().all(|v| *v == 0));
    // a 60-bit field starting at bit 4 of a 9-byte argument: the window behind it
    let l = ArgLayout::new(
        72,
        &[
            Part::Field { slot: 0, width: 4 },
            Part::Field { slot: 1, width: 60 },
            Part::Field { slot: 2, width: 8 },
        ],
    )
    .unwrap();
    let bytes: Vec<u8> = (1..=9).collect();
    let mut s = vec![0u64; 3];
    l.write(&bytes, &mut s);
    assert_eq!(s, [0, 0x0102_0304_0506_0708, 9]);
    let mut back = [0u8; 9];
    l.read(&s, &mut back);
    assert_eq!(&back[..], &bytes[..]);
}

#[test]
fn wide_fields_move_word_by_word() {
    // a 128-bit key: low word in the first slot
    let l = ArgLayout::new(
        128,
        &[Part::Field {
            slot: 2,
            width: 128,
        }],
    )
    .unwrap();
    let slots = vec![0, 0, 0x0809_0a0b_0c0d_0e0f, 0x0001_0203_0405_0607];
    let mut out = [0u8; 16];
    l.read(&slots, &mut out);
    assert_eq!(out, core::array::from_fn::<u8, 16, _>(|i| i as u8));
    let mut back = vec![0u64; 4];
    l.write(&out, &mut back);
    assert_eq!(back, slots);
}
