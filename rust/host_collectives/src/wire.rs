//! Frames on the loopback sockets: a 16-byte header (kind: u32, 4 bytes zero, payload length: u64,
//! little-endian) and the payload. The rendezvous (JOIN, STATUS, ROSTER, REFUSED) and the
//! connections between ranks (HELLO, DATA, ACK, COLL, BYE, ABORT) share the format.
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

pub(crate) const JOIN: u32 = 1;
pub(crate) const STATUS: u32 = 2;
pub(crate) const ROSTER: u32 = 3;
pub(crate) const REFUSED: u32 = 4;
pub(crate) const HELLO: u32 = 5;
pub(crate) const DATA: u32 = 10;
pub(crate) const ACK: u32 = 11;
pub(crate) const COLL: u32 = 12;
pub(crate) const BYE: u32 = 13;
pub(crate) const ABORT: u32 = 14;
const HEADER: usize = 16;
/// Largest control payload accepted (JOIN, ROSTER, ...): a sanity bound on a garbage peer.
const CONTROL_MAX: u64 = 1 << 20;

/// 127.0.0.1:`port`: nothing here listens or connects anywhere else.
pub(crate) fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

pub(crate) fn write_frame(mut w: &TcpStream, kind: u32, parts: &[&[u8]]) -> io::Result<()> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let mut header = [0u8; HEADER];
    header[..4].copy_from_slice(&kind.to_le_bytes());
    header[8..].copy_from_slice(&(len as u64).to_le_bytes());
    w.write_all(&header)?;
    for p in parts {
        w.write_all(p)?;
    }
    Ok(())
}

/// The next frame's kind and length; None on a clean end of stream before a header.
pub(crate) fn read_header(mut r: &TcpStream) -> io::Result<Option<(u32, u64)>> {
    let mut header = [0u8; HEADER];
    let mut got = 0;
    while got < HEADER {
        match r.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some((u32_at(&header, 0), u64_at(&header, 8))))
}

/// A whole control frame (bounded by CONTROL_MAX); None on a clean end of stream.
pub(crate) fn read_control(mut r: &TcpStream) -> io::Result<Option<(u32, Vec<u8>)>> {
    let Some((kind, len)) = read_header(r)? else {
        return Ok(None);
    };
    if len > CONTROL_MAX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "oversized control frame",
        ));
    }
    let mut payload = vec![0u8; len as usize];
    r.read_exact(&mut payload)?;
    Ok(Some((kind, payload)))
}

/// The little-endian u32 at `at` (0 past the end: callers check lengths first).
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(u32::from_le_bytes)
        .unwrap_or(0)
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

/// Time left until `deadline`; None once it has passed.
pub(crate) fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}
