//! Classic pcap files (the libpcap format, not pcapng): a reader for `pcap:in=FILE` ports and a
//! writer for `pcap:out=FILE` ports and `--pcap-dir` captures. Read: either byte order, micro- or
//! nanosecond timestamps, link types Ethernet (1) and raw IP (101, 228, 229; such packets get the
//! synthetic Ethernet header of TUN ports). Written: microsecond timestamps, link type Ethernet.

use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

/// The largest frame a pcap input may hold.
pub const MAX_FRAME: usize = 65536;

const LINKTYPE_ETHERNET: u32 = 1;
const LINKTYPE_RAW: u32 = 101;
const LINKTYPE_IPV4: u32 = 228;
const LINKTYPE_IPV6: u32 = 229;

/// A packet timestamp (seconds and microseconds since the epoch).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ts {
    pub sec: u32,
    pub usec: u32,
}

impl Ts {
    pub fn now() -> Ts {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ts {
            sec: d.as_secs() as u32,
            usec: d.subsec_micros(),
        }
    }
}

/// Frames from a pcap file, in order.
pub struct Reader {
    r: BufReader<File>,
    pub path: PathBuf,
    swap: bool,
    nsec: bool,
    raw_ip: bool,
    /// Frames read so far.
    pub frames: u64,
}

fn u32_at(b: &[u8], swap: bool) -> u32 {
    let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    if swap {
        v.swap_bytes()
    } else {
        v
    }
}

/// Fill `buf[..n]` as much as the reader gives; the number of bytes read (short only at the end of
/// the file).
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl Reader {
    /// Open `path` and check its file header.
    pub fn open(path: &Path) -> Result<Reader, String> {
        let p = path.display();
        let f = File::open(path).map_err(|e| format!("cannot open {p}: {e}"))?;
        if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
            return Err(format!("{p} is a directory, not a pcap file"));
        }
        let mut r = BufReader::with_capacity(1 << 16, f);
        let mut h = [0u8; 24];
        let n = read_full(&mut r, &mut h).map_err(|e| format!("cannot read {p}: {e}"))?;
        if n >= 4 && h[..4] == [0x0a, 0x0d, 0x0d, 0x0a] {
            return Err(format!("{p} is a pcapng file; only classic pcap files are read (convert it: editcap -F pcap IN OUT)"));
        }
        if n < 24 {
            return Err(format!(
                "{p} is not a pcap file (only {n} bytes, shorter than a pcap file header)"
            ));
        }
        let (swap, nsec) = match u32::from_le_bytes([h[0], h[1], h[2], h[3]]) {
            0xa1b2c3d4 => (false, false),
            0xd4c3b2a1 => (true, false),
            0xa1b23c4d => (false, true),
            0x4d3cb2a1 => (true, true),
            _ => {
                return Err(format!(
                    "{p} is not a pcap file (it starts with {:02x} {:02x} {:02x} {:02x})",
                    h[0], h[1], h[2], h[3]
                ))
            }
        };
        let major = u16::from_le_bytes([h[4], h[5]]);
        let major = if swap { major.swap_bytes() } else { major };
        if major != 2 {
            return Err(format!(
                "{p}: unsupported pcap format version {major} (2 expected)"
            ));
        }
        let linktype = u32_at(&h[20..24], swap) & 0x0fff_ffff;
        let raw_ip = match linktype {
            LINKTYPE_ETHERNET => false,
            LINKTYPE_RAW | LINKTYPE_IPV4 | LINKTYPE_IPV6 => true,
            t => {
                return Err(format!(
                "{p}: link type {t} is not supported (Ethernet (1) and raw IP (101, 228, 229) are)"
            ))
            }
        };
        Ok(Reader {
            r,
            path: path.to_path_buf(),
            swap,
            nsec,
            raw_ip,
            frames: 0,
        })
    }

    /// The next frame into `buf` (at least `MAX_FRAME + 14` bytes): its length and timestamp,
    /// `None` at the end of the file. Raw IP packets get the synthetic Ethernet header of port
    /// `port` (as TUN ports do).
    pub fn next(&mut self, buf: &mut [u8], port: u32) -> Result<Option<(usize, Ts)>, String> {
        let p = self.path.display();
        let k = self.frames + 1;
        let mut h = [0u8; 16];
        let n = read_full(&mut self.r, &mut h)
            .map_err(|e| format!("{p}: cannot read record {k}: {e}"))?;
        if n == 0 {
            return Ok(None);
        }
        if n < 16 {
            return Err(format!("{p}: truncated record header (record {k})"));
        }
        let sec = u32_at(&h[0..4], self.swap);
        let frac = u32_at(&h[4..8], self.swap);
        let incl = u32_at(&h[8..12], self.swap) as usize;
        if incl > MAX_FRAME {
            return Err(format!(
                "{p}: record {k} holds {incl} bytes, more than {MAX_FRAME} (corrupt file?)"
            ));
        }
        let off = if self.raw_ip { 14 } else { 0 };
        let got = read_full(&mut self.r, &mut buf[off..off + incl])
            .map_err(|e| format!("{p}: cannot read record {k}: {e}"))?;
        if got < incl {
            return Err(format!(
                "{p}: record {k} is truncated ({got} of {incl} bytes)"
            ));
        }
        self.frames += 1;
        let ts = Ts {
            sec,
            usec: if self.nsec { frac / 1000 } else { frac },
        };
        if self.raw_ip {
            if !crate::tuntap::ip_to_ethernet(&mut buf[..14 + incl], port) {
                return Err(format!(
                    "{p}: record {k} is not an IPv4 or IPv6 packet (link type raw IP)"
                ));
            }
            return Ok(Some((14 + incl, ts)));
        }
        Ok(Some((incl, ts)))
    }
}

/// A pcap file being written (link type Ethernet).
pub struct Writer {
    w: BufWriter<File>,
    pub path: PathBuf,
    failed: bool,
}

impl Writer {
    /// Create (or truncate) `path` and write the file header.
    pub fn create(path: &Path) -> Result<Writer, String> {
        let f = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let mut w = BufWriter::with_capacity(1 << 16, f);
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&262_144u32.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        w.write_all(&h)
            .and_then(|_| w.flush())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(Writer {
            w,
            path: path.to_path_buf(),
            failed: false,
        })
    }

    /// Append one frame; an error is reported once (at level error) and returned.
    pub fn write(&mut self, ts: Ts, frame: &[u8]) -> std::io::Result<()> {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&ts.sec.to_le_bytes());
        h[4..8].copy_from_slice(&ts.usec.to_le_bytes());
        h[8..12].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        let r = self.w.write_all(&h).and_then(|_| self.w.write_all(frame));
        self.note(r)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        let r = self.w.flush();
        self.note(r)
    }

    fn note(&mut self, r: std::io::Result<()>) -> std::io::Result<()> {
        if let Err(e) = &r {
            if !self.failed {
                self.failed = true;
                p4log!(
                    crate::log::Level::Error,
                    "cannot write {}: {e}",
                    self.path.display()
                );
            }
        }
        r
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcap_round_trip() {
        let dir = std::env::temp_dir().join(format!("p4sec-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.pcap");
        {
            let mut w = Writer::create(&f).unwrap();
            w.write(Ts { sec: 5, usec: 6 }, &[1, 2, 3]).unwrap();
            w.write(Ts { sec: 7, usec: 8 }, &[4; 60]).unwrap();
        }
        let mut r = Reader::open(&f).unwrap();
        let mut buf = vec![0u8; MAX_FRAME + 64];
        assert_eq!(
            r.next(&mut buf, 1).unwrap(),
            Some((3, Ts { sec: 5, usec: 6 }))
        );
        assert_eq!(&buf[..3], &[1, 2, 3]);
        assert_eq!(
            r.next(&mut buf, 1).unwrap(),
            Some((60, Ts { sec: 7, usec: 8 }))
        );
        assert_eq!(r.next(&mut buf, 1).unwrap(), None);
        std::fs::write(&f, b"hello, this is not a pcap file at all").unwrap();
        assert!(Reader::open(&f).err().unwrap().contains("not a pcap file"));
        std::fs::write(&f, b"\xd4\xc3").unwrap();
        assert!(Reader::open(&f).err().unwrap().contains("not a pcap file"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
