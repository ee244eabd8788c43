//! What a collective call looked like on one rank. Collectives are matched by their order on each
//! rank, like NCCL's; the ranks of one collective must agree on its signature, and every transport
//! computes the result from the contributions the same way (`Signature::combine`).
use crate::reduce::{reduce, DataType, ReduceOp};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signature {
    AllReduce {
        count: usize,
        datatype: DataType,
        op: ReduceOp,
    },
    Broadcast {
        count: usize,
        datatype: DataType,
        root: usize,
    },
}

/// Bytes of an encoded signature on the wire.
pub(crate) const SIGNATURE_BYTES: usize = 1 + 8 + 4 + 8;

impl Signature {
    /// The result of the collective from every rank's contribution, in rank order (a broadcast's
    /// non-root ranks contribute nothing).
    pub fn combine(&self, parts: &[&[u8]]) -> Vec<u8> {
        match *self {
            Signature::AllReduce { datatype, op, .. } => reduce(parts, datatype, op),
            Signature::Broadcast { root, .. } => {
                parts.get(root).map_or_else(Vec::new, |p| p.to_vec())
            }
        }
    }

    /// Whether `rank` contributes its buffer (every rank of an all-reduce, the root of a broadcast).
    pub fn contributes(&self, rank: usize) -> bool {
        match *self {
            Signature::AllReduce { .. } => true,
            Signature::Broadcast { root, .. } => root == rank,
        }
    }

    pub(crate) fn encode(&self) -> [u8; SIGNATURE_BYTES] {
        let (kind, count, datatype, extra) = match *self {
            Signature::AllReduce {
                count,
                datatype,
                op,
            } => (0u8, count, datatype, op.wire_code()),
            Signature::Broadcast {
                count,
                datatype,
                root,
            } => (1u8, count, datatype, root as u64),
        };
        let mut out = [0u8; SIGNATURE_BYTES];
        out[0] = kind;
        out[1..9].copy_from_slice(&(count as u64).to_le_bytes());
        out[9..13].copy_from_slice(&datatype.wire_code().to_le_bytes());
        out[13..].copy_from_slice(&extra.to_le_bytes());
        out
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Signature> {
        if b.len() != SIGNATURE_BYTES {
            return None;
        }
        let count = usize::try_from(u64::from_le_bytes(b[1..9].try_into().ok()?)).ok()?;
        let datatype = DataType::from_wire_code(u32::from_le_bytes(b[9..13].try_into().ok()?))?;
        let extra = u64::from_le_bytes(b[13..].try_into().ok()?);
        match b[0] {
            0 => Some(Signature::AllReduce {
                count,
                datatype,
                op: ReduceOp::from_wire_code(extra)?,
            }),
            1 => Some(Signature::Broadcast {
                count,
                datatype,
                root: usize::try_from(extra).ok()?,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_round_trip_and_garbage_is_refused() {
        let all = [
            Signature::AllReduce {
                count: 7,
                datatype: DataType::BF16,
                op: ReduceOp::Avg,
            },
            Signature::Broadcast {
                count: 1 << 40,
                datatype: DataType::U8,
                root: 3,
            },
        ];
        for s in all {
            assert_eq!(Signature::decode(&s.encode()), Some(s));
        }
        let mut bad = all[0].encode();
        bad[0] = 2;
        assert_eq!(Signature::decode(&bad), None);
        assert_eq!(Signature::decode(&bad[..5]), None);
    }

    #[test]
    fn a_broadcast_takes_the_roots_part() {
        let s = Signature::Broadcast {
            count: 2,
            datatype: DataType::U8,
            root: 1,
        };
        assert_eq!(s.combine(&[&[], &[4, 5], &[]]), vec![4, 5]);
        assert!(s.contributes(1) && !s.contributes(0));
    }
}
