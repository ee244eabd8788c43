//! The unique id: 128 bytes (NCCL's size) that name one communicator-to-be and where its ranks meet.
//!
//! | bytes   | what |
//! |---------|------|
//! | 0..8    | magic `mr-host\0` (an id of this crate) |
//! | 8..12   | the pid of the process that made it |
//! | 12..20  | a per-process counter |
//! | 20..28  | a nonce (the clock at creation) |
//! | 28..30  | the port of that process's rendezvous server on 127.0.0.1 (0: none, threads only) |
//! | 30      | the layout version (1) when a port is set |
//! | 32..48  | a random token the rendezvous server issued it with |
//! | 48..128 | zero |
//!
//! The first 48 bytes are the id's key: what the rendezvous and the in-process registry look it up
//! by, and what a rank proves itself with when it connects to a peer.
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::failure::{Failure, Result};

/// Bytes in a unique id.
pub const UNIQUE_ID_BYTES: usize = 128;
const MAGIC: &[u8; 8] = b"mr-host\0";
const ID_VERSION: u8 = 1;
/// Bytes of the id that identify it (magic, pid, counter, nonce, port, version, token).
pub(crate) const KEY_BYTES: usize = 48;
pub(crate) type Key = [u8; KEY_BYTES];

/// The id every rank of one communicator joins with (make it with `UniqueId::new`, pass its bytes
/// to the other ranks however you like).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId {
    bytes: [u8; UNIQUE_ID_BYTES],
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex: String = self.bytes[..KEY_BYTES]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        write!(f, "UniqueId({hex})")
    }
}

impl UniqueId {
    /// An id from its bytes (checked when a rank joins with it, not here).
    pub fn from_bytes(bytes: [u8; UNIQUE_ID_BYTES]) -> UniqueId {
        UniqueId { bytes }
    }

    pub fn as_bytes(&self) -> &[u8; UNIQUE_ID_BYTES] {
        &self.bytes
    }

    /// A fresh id of this process; `rendezvous`: its server's port and the token it registers the
    /// id under (None: the process could not listen, so the id joins threads of this process only).
    pub(crate) fn compose(rendezvous: Option<(u16, [u8; 16])>) -> UniqueId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut raw = [0u8; UNIQUE_ID_BYTES];
        raw[..8].copy_from_slice(MAGIC);
        raw[8..12].copy_from_slice(&std::process::id().to_le_bytes());
        raw[12..20].copy_from_slice(&NEXT.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        raw[20..28].copy_from_slice(&nonce.to_le_bytes());
        if let Some((port, token)) = rendezvous {
            raw[28..30].copy_from_slice(&port.to_le_bytes());
            raw[30] = ID_VERSION;
            raw[32..48].copy_from_slice(&token);
        }
        UniqueId { bytes: raw }
    }

    /// What the id says, if it is an id of this crate.
    pub(crate) fn parse(&self) -> Result<IdInfo> {
        let raw = &self.bytes;
        if &raw[..8] != MAGIC {
            return Err(Failure::invalid_argument(
                "the unique id was not made by this host communicator (a monarch_runtime CPU build)",
            ));
        }
        let mut key = [0u8; KEY_BYTES];
        key.copy_from_slice(&raw[..KEY_BYTES]);
        let port = if raw[30] == ID_VERSION {
            u16::from_le_bytes([raw[28], raw[29]])
        } else {
            0
        };
        Ok(IdInfo {
            key,
            pid: u32::from_le_bytes([raw[8], raw[9], raw[10], raw[11]]),
            port,
        })
    }
}

/// What a unique id says about its rendezvous.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IdInfo {
    pub key: Key,
    /// The process that made the id (and runs its rendezvous server).
    pub pid: u32,
    /// The rendezvous server's port; 0 when the process could not listen (in-process ids only).
    pub port: u16,
}

/// 16 unguessable bytes (for an id's token).
pub(crate) fn random_token() -> [u8; 16] {
    let mut token = [0u8; 16];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut token));
    if from_os.is_err() {
        // std's hasher keys are random per process: good enough to make a token unguessable here.
        use std::hash::{BuildHasher, Hasher};
        for (i, piece) in token.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0),
            );
            piece.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    token
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_as_documented() {
        let id = UniqueId::compose(Some((0x1234, [7; 16])));
        let info = id.parse().unwrap();
        assert_eq!(info.port, 0x1234);
        assert_eq!(info.pid, std::process::id());
        assert_eq!(&info.key[32..48], &[7; 16]);
        assert!(id.as_bytes()[KEY_BYTES..].iter().all(|&b| b == 0));
        let local = UniqueId::compose(None).parse().unwrap();
        assert_eq!(local.port, 0);
        assert_ne!(local.key, UniqueId::compose(None).parse().unwrap().key);
    }

    #[test]
    fn a_foreign_id_is_refused() {
        let err = UniqueId::from_bytes([0; UNIQUE_ID_BYTES])
            .parse()
            .unwrap_err();
        assert_eq!(err.kind, crate::failure::FailureKind::InvalidArgument);
        assert!(err.message.contains("not made by"), "{err}");
    }
}
