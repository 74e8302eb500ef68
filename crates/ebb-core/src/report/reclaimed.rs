//! What reclaims of long-stopped boxes came to (`stopped.reclaim_after`): the hours a box stayed
//! terminated, its data in its image, are hours its disks were not paid (the gross); the hours
//! the image was kept, from its notice's end until it was deregistered, are hours its snapshots
//! were paid (taken off the net). Both under the reclaim's policy. A reclaim's saving is
//! counted only when its image's cost is known too: never the one without the other.

use super::tally::Tally;
use super::{History, Measures, ReclaimSpan, Window};
use crate::fleet::money::PriceTable;

/// Adds the reclaims of `history` to `tally`: their terminated hours and image hours inside
/// `window`.
pub(super) fn reclaims(history: &History, window: Window, prices: &PriceTable, tally: &mut Tally) {
    for r in &history.reclaims {
        let info = history.instances.get(&r.instance);
        let policy = Some(r.policy.as_str());
        let (disks, image) = rates(r, prices);
        let image_until = r.image_deleted_at.unwrap_or(window.until);
        if let Some(span) = window.clip(r.imaged_from, image_until) {
            tally.add_span(span, policy, info, |h| Measures {
                image_hours: h,
                image_storage_usd: image.map_or(0.0, |rate| rate * h),
                unpriced_reclaim_hours: if image.is_none() { h } else { 0.0 },
                ..Measures::default()
            });
        }
        let Some(terminated) = r.terminated_at else {
            continue;
        };
        let back = r.restore_asked_at.unwrap_or(window.until);
        let Some(span) = window.clip(terminated, back) else {
            continue;
        };
        // Saved only beside a known image cost: the saving and its cost are counted together.
        let saved = disks.zip(image).map(|(disks, _)| disks);
        tally.add_span(span, policy, info, |h| {
            let usd = saved.map_or(0.0, |rate| rate * h);
            Measures {
                saved_usd: usd,
                reclaim_saved_usd: usd,
                reclaimed_hours: h,
                unpriced_reclaim_hours: if saved.is_none() { h } else { 0.0 },
                ..Measures::default()
            }
        });
    }
}

/// The $/hour of `r`'s disks at EBS prices and of its image at the snapshot price, each when
/// its volumes were recorded and the table prices them.
fn rates(r: &ReclaimSpan, prices: &PriceTable) -> (Option<f64>, Option<f64>) {
    let (Some(volumes), Some(costs)) = (&r.volumes, &prices.while_stopped) else {
        return (None, None);
    };
    let disks = volumes.iter().try_fold(0.0, |sum, v| {
        Some(sum + costs.volume_hour(&r.region, &v.volume_type, v.size_gib)?)
    });
    (disks, costs.snapshot_hour(&r.region, volumes))
}
