//! Element types and reductions: what an all-reduce computes, the same on every transport.
//!
//! Reductions run in rank order. Integer sums and products wrap, integer `Avg` truncates toward
//! zero. Floating-point types accumulate in f64 and round once to the element type (NCCL rounds at
//! each step of its ring or tree, so results may differ from it in the last bit), which makes every
//! rank of every transport get the same bits.

/// An element type (little-endian in memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    I8,
    U8,
    I32,
    U32,
    I64,
    U64,
    /// IEEE binary16.
    F16,
    F32,
    F64,
    /// bfloat16 (the upper half of an f32).
    BF16,
}

impl DataType {
    pub const ALL: [DataType; 10] = [
        DataType::I8,
        DataType::U8,
        DataType::I32,
        DataType::U32,
        DataType::I64,
        DataType::U64,
        DataType::F16,
        DataType::F32,
        DataType::F64,
        DataType::BF16,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DataType::I8 | DataType::U8 => 1,
            DataType::F16 | DataType::BF16 => 2,
            DataType::I32 | DataType::U32 | DataType::F32 => 4,
            DataType::I64 | DataType::U64 | DataType::F64 => 8,
        }
    }

    /// The type's number on the wire between processes.
    pub(crate) fn wire_code(self) -> u32 {
        DataType::ALL.iter().position(|&d| d == self).unwrap_or(0) as u32
    }

    pub(crate) fn from_wire_code(code: u32) -> Option<DataType> {
        DataType::ALL.get(code as usize).copied()
    }
}

/// A reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    /// The sum divided by the number of ranks.
    Avg,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Avg,
    ];

    pub(crate) fn wire_code(self) -> u64 {
        ReduceOp::ALL.iter().position(|&o| o == self).unwrap_or(0) as u64
    }

    pub(crate) fn from_wire_code(code: u64) -> Option<ReduceOp> {
        usize::try_from(code)
            .ok()
            .and_then(|i| ReduceOp::ALL.get(i).copied())
    }
}

/// IEEE binary16 -> f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let mant = (h & 0x3ff) as u32;
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: value = mant * 2^-24.
            let v = mant as f32 * f32::from_bits(0x3380_0000); // 2^-24
            return if sign != 0 { -v } else { v };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000 | (mant << 13),
        _ => sign | ((exp + 112) << 23) | (mant << 13),
    };
    f32::from_bits(bits)
}

/// f32 -> IEEE binary16, round to nearest even.
pub fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let mant = x & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00; // overflow -> inf
    }
    if e <= 0 {
        if e < -10 {
            return sign; // underflow -> zero
        }
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1u32 << shift) - 1);
        let mut out = m >> shift;
        if rest > half || (rest == half && out & 1 == 1) {
            out += 1;
        }
        return sign | out as u16;
    }
    let mut out = ((e as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && out & 1 == 1) {
        out += 1; // may carry into the exponent, which is the correct rounding
    }
    sign | out as u16
}

/// bfloat16 -> f32 (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// f32 -> bfloat16, round to nearest even (NaN stays NaN).
pub fn f32_to_bf16(f: f32) -> u16 {
    let x = f.to_bits();
    if f.is_nan() {
        return ((x >> 16) as u16) | 0x40;
    }
    let rounding = 0x7fff + ((x >> 16) & 1);
    (x.wrapping_add(rounding) >> 16) as u16
}

macro_rules! reduce_ints {
    ($t:ty, $parts:expr, $op:expr) => {{
        let parts: &[&[u8]] = $parts;
        let width = std::mem::size_of::<$t>();
        let read = |p: &[u8], i: usize| {
            let mut bytes = [0u8; std::mem::size_of::<$t>()];
            bytes.copy_from_slice(&p[i * width..(i + 1) * width]);
            <$t>::from_le_bytes(bytes)
        };
        let len = parts[0].len() / width;
        let mut out = Vec::with_capacity(parts[0].len());
        for i in 0..len {
            let mut acc = read(parts[0], i);
            for p in &parts[1..] {
                let v = read(p, i);
                acc = match $op {
                    ReduceOp::Sum | ReduceOp::Avg => acc.wrapping_add(v),
                    ReduceOp::Prod => acc.wrapping_mul(v),
                    ReduceOp::Max => acc.max(v),
                    ReduceOp::Min => acc.min(v),
                };
            }
            if $op == ReduceOp::Avg {
                acc /= parts.len() as $t;
            }
            out.extend_from_slice(&acc.to_le_bytes());
        }
        out
    }};
}

/// Reduces float-like elements through f64, in rank order.
fn reduce_floats<const W: usize>(
    parts: &[&[u8]],
    op: ReduceOp,
    load: impl Fn([u8; W]) -> f64,
    store: impl Fn(f64) -> [u8; W],
) -> Vec<u8> {
    let len = parts[0].len() / W;
    let mut out = Vec::with_capacity(parts[0].len());
    let at = |p: &[u8], i: usize| {
        let mut bytes = [0u8; W];
        bytes.copy_from_slice(&p[i * W..(i + 1) * W]);
        load(bytes)
    };
    for i in 0..len {
        let mut acc = at(parts[0], i);
        for p in &parts[1..] {
            let v = at(p, i);
            acc = match op {
                ReduceOp::Sum | ReduceOp::Avg => acc + v,
                ReduceOp::Prod => acc * v,
                ReduceOp::Max => acc.max(v),
                ReduceOp::Min => acc.min(v),
            };
        }
        if op == ReduceOp::Avg {
            acc /= parts.len() as f64;
        }
        out.extend_from_slice(&store(acc));
    }
    out
}

/// Every rank's contribution (`parts`, in rank order, each a whole number of `datatype` elements of
/// the same length) reduced element-wise with `op`. No parts: nothing.
pub fn reduce(parts: &[&[u8]], datatype: DataType, op: ReduceOp) -> Vec<u8> {
    if parts.is_empty() {
        return Vec::new();
    }
    match datatype {
        DataType::I8 => reduce_ints!(i8, parts, op),
        DataType::U8 => reduce_ints!(u8, parts, op),
        DataType::I32 => reduce_ints!(i32, parts, op),
        DataType::U32 => reduce_ints!(u32, parts, op),
        DataType::I64 => reduce_ints!(i64, parts, op),
        DataType::U64 => reduce_ints!(u64, parts, op),
        DataType::F32 => reduce_floats::<4>(
            parts,
            op,
            |b| f32::from_le_bytes(b) as f64,
            |v| (v as f32).to_le_bytes(),
        ),
        DataType::F64 => reduce_floats::<8>(parts, op, f64::from_le_bytes, f64::to_le_bytes),
        DataType::F16 => reduce_floats::<2>(
            parts,
            op,
            |b| f16_to_f32(u16::from_le_bytes(b)) as f64,
            |v| f32_to_f16(v as f32).to_le_bytes(),
        ),
        DataType::BF16 => reduce_floats::<2>(
            parts,
            op,
            |b| bf16_to_f32(u16::from_le_bytes(b)) as f64,
            |v| f32_to_bf16(v as f32).to_le_bytes(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_round_trips() {
        for v in [
            0.0f32,
            1.0,
            -2.5,
            65504.0,
            6.1035156e-5,
            5.9604645e-8,
            0.333_251_95,
        ] {
            assert_eq!(f16_to_f32(f32_to_f16(v)), v, "{v}");
        }
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(bf16_to_f32(f32_to_bf16(-3.5)), -3.5);
    }

    #[test]
    fn integer_sums_wrap_and_averages_truncate() {
        let a = 250u8.to_le_bytes();
        let b = 10u8.to_le_bytes();
        assert_eq!(reduce(&[&a, &b], DataType::U8, ReduceOp::Sum), [4]);
        let (x, y) = ((-7i32).to_le_bytes(), 2i32.to_le_bytes());
        assert_eq!(
            reduce(&[&x, &y], DataType::I32, ReduceOp::Avg),
            (-2i32).to_le_bytes()
        );
    }

    #[test]
    fn floats_round_once_from_f64() {
        // 1 + 2^-24 + 2^-24 is 1 + 2^-23 exactly in f64, but 1 in f32 step by step.
        let parts = [1.0f32, 2f32.powi(-24), 2f32.powi(-24)].map(f32::to_le_bytes);
        let slices: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
        assert_eq!(
            reduce(&slices, DataType::F32, ReduceOp::Sum),
            (1.0 + 2f32.powi(-23)).to_le_bytes()
        );
    }

    #[test]
    fn wire_codes_round_trip() {
        for d in DataType::ALL {
            assert_eq!(DataType::from_wire_code(d.wire_code()), Some(d));
        }
        for o in ReduceOp::ALL {
            assert_eq!(ReduceOp::from_wire_code(o.wire_code()), Some(o));
        }
        assert_eq!(DataType::from_wire_code(10), None);
        assert_eq!(ReduceOp::from_wire_code(5), None);
    }
}
