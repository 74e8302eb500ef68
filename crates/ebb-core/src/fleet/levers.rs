//! What ebb can do on each cloud beyond what it does on all of them (list, stop, start, tag):
//! data the engine is given (`ebb_cloud::cloud::levers` derives it from what each cloud's
//! provider implements), so a cloud that gains a lever needs no engine change.

use super::Cloud;

/// The levers ebb has on each cloud. The default is none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Levers {
    /// The clouds whose on-demand instances ebb can move to spot capacity.
    pub spot_moves: Clouds,
}

/// A set of clouds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clouds(u8);

impl Clouds {
    /// Adds `cloud`.
    pub fn insert(&mut self, cloud: Cloud) {
        self.0 |= Clouds::bit(cloud);
    }

    /// Whether it holds `cloud`.
    pub fn contains(self, cloud: Cloud) -> bool {
        self.0 & Clouds::bit(cloud) != 0
    }

    fn bit(cloud: Cloud) -> u8 {
        1 << cloud as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_holds_the_clouds_put_in_it_and_no_other() {
        let mut set = Clouds::default();
        set.insert(Cloud::Aws);
        set.insert(Cloud::Tencent);
        assert!(set.contains(Cloud::Aws));
        assert!(set.contains(Cloud::Tencent));
        assert!(!set.contains(Cloud::Alibaba));
        assert!(!Clouds::default().contains(Cloud::Aws));
    }
}
