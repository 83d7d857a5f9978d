//! The ConsumeQueue unit: 20 bytes, `i64 CommitLog physical offset, i32 record size, i64 tagsCode`
//! (Apache's `ConsumeQueue.putMessagePositionInfo`), big-endian. A ConsumeQueue file is nothing but
//! these units back to back, unit `n` at byte `n * 20`.

/// Size of one unit (`CQ_STORE_UNIT_SIZE`).
pub const CQ_UNIT_SIZE: usize = 20;

/// One decoded ConsumeQueue unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqUnit {
    pub phy_offset: i64,
    pub size: i32,
    pub tags_code: i64,
}

impl CqUnit {
    /// RocketMQ pads a queue whose first file starts mid-file with units of size `i32::MAX`.
    pub const PRE_BLANK: CqUnit = CqUnit {
        phy_offset: 0,
        size: i32::MAX,
        tags_code: 0,
    };

    pub fn encode(&self) -> [u8; CQ_UNIT_SIZE] {
        let mut b = [0u8; CQ_UNIT_SIZE];
        b[0..8].copy_from_slice(&self.phy_offset.to_be_bytes());
        b[8..12].copy_from_slice(&self.size.to_be_bytes());
        b[12..20].copy_from_slice(&self.tags_code.to_be_bytes());
        b
    }

    /// Decodes the unit at the start of `b`; `None` if fewer than 20 bytes are given.
    pub fn decode(b: &[u8]) -> Option<CqUnit> {
        let b = b.get(..CQ_UNIT_SIZE)?;
        Some(CqUnit {
            phy_offset: i64::from_be_bytes(b[0..8].try_into().ok()?),
            size: i32::from_be_bytes(b[8..12].try_into().ok()?),
            tags_code: i64::from_be_bytes(b[12..20].try_into().ok()?),
        })
    }

    /// Recovery's validity rule (`ConsumeQueue.recover`: `offset >= 0 && size > 0`): a unit is real
    /// if it points somewhere with a size.
    pub fn is_valid(&self) -> bool {
        self.phy_offset >= 0 && self.size > 0 && self.size != i32::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_golden_bytes() {
        let u = CqUnit {
            phy_offset: 0x0102_0304_0506_0708,
            size: 0x0A0B_0C0D,
            tags_code: -2,
        };
        let b = u.encode();
        assert_eq!(
            b,
            [
                1, 2, 3, 4, 5, 6, 7, 8, 0x0A, 0x0B, 0x0C, 0x0D, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                0xFF, 0xFE
            ]
        );
        assert_eq!(CqUnit::decode(&b), Some(u));
        assert_eq!(CqUnit::decode(&b[..19]), None);
    }
}
