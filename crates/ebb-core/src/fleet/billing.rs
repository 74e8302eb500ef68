//! How the cloud bills an instance and what a stop of it saves, filled in by its provider: on
//! EC2 a stop ends the compute charges; on Alibaba Cloud ECS and Tencent Cloud CVM only a stop
//! in the no-charge mode does, and not for every family or a subscription.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::LazyLock;
use wildmatch::WildMatch;

/// The cloud an instance is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cloud {
    /// Amazon EC2.
    Aws,
    /// Alibaba Cloud ECS.
    Alibaba,
    /// Tencent Cloud CVM.
    Tencent,
}

impl Cloud {
    /// The name `--cloud` and the families file use.
    pub fn as_str(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Alibaba => "alibaba",
            Cloud::Tencent => "tencent",
        }
    }

    /// The currency its boxes are billed in (ISO 4217), when a budget does not say: dollars
    /// on AWS, yuan on the Chinese clouds' China sites.
    pub fn currency(self) -> &'static str {
        match self {
            Cloud::Aws => "USD",
            Cloud::Alibaba | Cloud::Tencent => "CNY",
        }
    }

    /// The name people know it by.
    pub fn display_name(self) -> &'static str {
        match self {
            Cloud::Aws => "AWS EC2",
            Cloud::Alibaba => "Alibaba Cloud ECS",
            Cloud::Tencent => "Tencent Cloud CVM",
        }
    }
}

/// How an instance is paid for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Charge {
    /// By the time it runs (EC2 on-demand and spot, Alibaba `PostPaid`, Tencent
    /// `POSTPAID_BY_HOUR` and `SPOTPAID`): a stop can save.
    PayAsYouGo,
    /// Paid ahead for a term (Alibaba `PrePaid`, 包年包月; Tencent `PREPAID`): a stop saves
    /// nothing, so ebb never stops one.
    Subscription,
}

impl Charge {
    /// The snapshot's name of the charge type.
    pub fn as_str(self) -> &'static str {
        match self {
            Charge::PayAsYouGo => "pay-as-you-go",
            Charge::Subscription => "subscription",
        }
    }
}

/// What a stop of an instance's family saves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopSaving {
    /// Any stop ends the compute charges (EC2).
    Ends,
    /// A stop in the cloud's no-charge mode ends them (Alibaba `StoppedMode=StopCharging`,
    /// Tencent `StoppedMode=STOP_CHARGING`), which ebb always asks for.
    InNoChargeMode,
    /// The family cannot be stopped without charge (local disks, persistent memory): a stop
    /// keeps the compute billed. The pattern of [`charging_family`] that lists it.
    KeepsCharging {
        /// The family pattern, as the families file writes it (`ecs.i2*`).
        family: &'static str,
    },
}

/// How a stopped instance is billed, as its cloud reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoppedMode {
    /// Its compute is not billed (EC2's stopped instances, Alibaba `StopCharging`, Tencent
    /// `STOP_CHARGING`).
    NoCharge,
    /// It is billed as if it ran (Alibaba `KeepCharging`, Tencent `KEEP_CHARGING`): the stop
    /// saved nothing.
    Charging,
    /// The cloud did not say, or said something ebb does not know: no saving is counted.
    Unknown,
}

impl StoppedMode {
    /// The stable name used in JSON, tables and the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            StoppedMode::NoCharge => "no-charge",
            StoppedMode::Charging => "charging",
            StoppedMode::Unknown => "unknown",
        }
    }
}

/// A capacity reservation an instance runs in that ebb did not make (an On-Demand Capacity
/// Reservation or a Capacity Block someone holds): paid whether the instance runs or not, so
/// stopping the instance saves nothing while it lasts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HeldReservation {
    /// Its id, from the instance's own listing (EC2's `CapacityReservationId`).
    pub id: String,
    /// What the cloud says of it; `None` when reading it failed.
    pub terms: Option<ReservationTerms>,
}

/// What a held reservation is and when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReservationTerms {
    /// What kind of reservation it is.
    pub kind: ReservationKind,
    /// When it ends; `None` for one held until it is cancelled.
    pub end: Option<DateTime<Utc>>,
}

/// The kinds of capacity reservation EC2 has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReservationKind {
    /// An On-Demand Capacity Reservation: held until cancelled or its end date.
    CapacityReservation,
    /// A Capacity Block for ML: bought for a fixed span.
    CapacityBlock,
}

impl HeldReservation {
    /// The reservation in words: its id, what it is and its end.
    pub fn describe(&self) -> String {
        let Some(terms) = self.terms else {
            return format!(
                "capacity reservation {} (its end could not be read)",
                self.id
            );
        };
        let what = match terms.kind {
            ReservationKind::CapacityReservation => "capacity reservation",
            ReservationKind::CapacityBlock => "Capacity Block",
        };
        match terms.end {
            Some(end) => format!(
                "{what} {} (ending {})",
                self.id,
                end.format("%Y-%m-%dT%H:%MZ")
            ),
            None => format!("{what} {} (held until cancelled)", self.id),
        }
    }
}

/// How the cloud bills one instance and what stopping it saves, filled in by its provider.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Billing {
    /// The cloud it is in.
    pub cloud: Cloud,
    /// How it is paid for.
    pub charge: Charge,
    /// What a stop of its family saves.
    pub stop_saving: StopSaving,
    /// For a stopped instance, how the cloud says it is billed now; `None` while it is not
    /// stopped.
    pub stopped_mode: Option<StoppedMode>,
    /// The cloud has marked this preemptible instance to be taken back soon (Alibaba's
    /// `OperationLocks` with `LockReason=Recycling`, about five minutes before): an
    /// interruption warning, and ebb leaves the instance alone.
    pub recycling: bool,
    /// The capacity reservation held outside ebb that this running instance runs in, if any
    /// (boxed: few boxes run in one, and every listed instance carries the field).
    pub reservation: Option<Box<HeldReservation>>,
    /// It has a public IPv4 address from the cloud's own pool, not an Elastic IP of the
    /// account (EC2's `IpOwnerId` `amazon`): EC2 gives it up at every stop.
    pub public_ip_from_pool: bool,
}

impl Billing {
    /// An EC2 instance that is not stopped: paid by the hour, any stop ends its compute
    /// charges.
    pub const EC2: Billing = Billing {
        cloud: Cloud::Aws,
        charge: Charge::PayAsYouGo,
        stop_saving: StopSaving::Ends,
        stopped_mode: None,
        recycling: false,
        reservation: None,
        public_ip_from_pool: false,
    };

    /// An EC2 instance, stopped or not as `stopped` says: a stopped one is not billed for
    /// compute.
    pub fn ec2(stopped: bool) -> Billing {
        Billing {
            stopped_mode: stopped.then_some(StoppedMode::NoCharge),
            ..Billing::EC2
        }
    }

    /// An instance of `cloud` of type `instance_type`, of `family` when the cloud says it
    /// (Alibaba's `InstanceTypeFamily`), paid as `charge`: what a stop of it saves from the
    /// families file, not stopped, no lock.
    pub fn of(cloud: Cloud, charge: Charge, instance_type: &str, family: Option<&str>) -> Billing {
        let stop_saving = match cloud {
            Cloud::Aws => StopSaving::Ends,
            _ => match charging_family(cloud, instance_type, family) {
                Some(family) => StopSaving::KeepsCharging { family },
                None => StopSaving::InNoChargeMode,
            },
        };
        Billing {
            cloud,
            charge,
            stop_saving,
            stopped_mode: None,
            recycling: false,
            reservation: None,
            public_ip_from_pool: false,
        }
    }

    /// Whether a stop ends the instance's compute charges when ebb asks for it: pay-as-you-go,
    /// and a family that can stop without charge.
    pub fn stop_saves(&self) -> bool {
        self.charge == Charge::PayAsYouGo
            && !matches!(self.stop_saving, StopSaving::KeepsCharging { .. })
    }

    /// Whether ebb warns that a stop it asks for gives up the public IP the cloud assigned: a
    /// stop in no-charge mode does (Alibaba Cloud ECS, Tencent Cloud CVM; an EIP stays), so the
    /// instance has another after its next start, where a stop of the same box that charges
    /// would have kept it; and every EC2 stop of a box whose public IPv4 address is from
    /// Amazon's pool (an Elastic IP stays).
    pub fn stop_releases_public_ip(&self) -> bool {
        self.stop_saves()
            && (matches!(self.stop_saving, StopSaving::InNoChargeMode) || self.public_ip_from_pool)
    }
}

/// The lasting part of how an instance is billed (its cloud, how it is paid, and the families
/// file's pattern when a stop keeps it charging), as Postgres keeps it with the instance, so
/// that what is worked out from Postgres (replay, advise, the console's explanations) bills
/// each box as its cloud does. What changes with each stop is not kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BillingModel {
    /// The cloud it is in.
    pub cloud: Cloud,
    /// How it is paid for.
    pub charge: Charge,
    /// The families file's pattern that lists its family, when a stop keeps it charging
    /// (borrowed from the file when made from a listing: a sync writes one per instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keeps_charging: Option<Cow<'static, str>>,
}

impl Billing {
    /// What of it lasts.
    pub fn model(&self) -> BillingModel {
        BillingModel {
            cloud: self.cloud,
            charge: self.charge,
            keeps_charging: match self.stop_saving {
                StopSaving::KeepsCharging { family } => Some(Cow::Borrowed(family)),
                _ => None,
            },
        }
    }

    /// An instance of type `instance_type` billed as `model`, stopped or not as `stopped`
    /// says: a stopped EC2 box is not billed for compute, and what another cloud bills a
    /// stopped box for is unknown (it was not kept).
    pub fn from_model(model: &BillingModel, instance_type: &str, stopped: bool) -> Billing {
        let billing = Billing::of(
            model.cloud,
            model.charge,
            instance_type,
            model.keeps_charging.as_deref(),
        );
        let stopped_mode = match model.cloud {
            Cloud::Aws => StoppedMode::NoCharge,
            _ => StoppedMode::Unknown,
        };
        Billing {
            stopped_mode: stopped.then_some(stopped_mode),
            ..billing
        }
    }
}

/// One line of the families file: a family pattern of a cloud that cannot stop without charge.
struct ChargingFamily {
    cloud: Cloud,
    pattern: &'static str,
    glob: WildMatch,
}

/// The families file, compiled in.
const FAMILIES_FILE: &str = include_str!("no_charge_stop_exceptions.txt");

/// The families file, parsed once.
static FAMILIES: LazyLock<Vec<ChargingFamily>> = LazyLock::new(|| parse_families(FAMILIES_FILE));

/// The lines of the families file. A line naming a cloud ebb does not know is a mistake in a
/// file compiled in, which the tests catch; it is skipped.
fn parse_families(text: &'static str) -> Vec<ChargingFamily> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let cloud = match words.next()? {
                "alibaba" => Cloud::Alibaba,
                "tencent" => Cloud::Tencent,
                _ => return None,
            };
            let pattern = words.next()?;
            Some(ChargingFamily {
                cloud,
                pattern,
                glob: WildMatch::new(pattern),
            })
        })
        .collect()
}

/// The families `instance_type` may be of, when the cloud does not say: the type without its
/// size (`ecs.gn7i-c8g1.2xlarge` is `ecs.gn7i-c8g1`, `GN7.2XLARGE32` is `GN7`), and that
/// before its first `-`, since Alibaba names most families so (`ecs.gn5-c4g1.xlarge` is of
/// `ecs.gn5`) and some with a dash (`ecs.re6p-redis`).
pub fn families_of(instance_type: &str) -> [&str; 2] {
    let sized = instance_type
        .rsplit_once('.')
        .map_or(instance_type, |(family, _)| family);
    [
        sized,
        sized.split_once('-').map_or(sized, |(family, _)| family),
    ]
}

/// The pattern of the families file that lists `family` of `cloud` as a family that cannot
/// stop without charge, if one does. Without `family` (a cloud that does not say it), each
/// family `instance_type` may be of is looked up: a stop that may keep charging is refused.
pub fn charging_family(
    cloud: Cloud,
    instance_type: &str,
    family: Option<&str>,
) -> Option<&'static str> {
    let candidates = match family {
        Some(family) => [family, family],
        None => families_of(instance_type),
    };
    FAMILIES
        .iter()
        .find(|f| f.cloud == cloud && candidates.iter().any(|c| f.glob.matches(c)))
        .map(|f| f.pattern)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_model_bills_a_box_as_its_listing_did() {
        let gn5 = Billing::of(
            Cloud::Alibaba,
            Charge::PayAsYouGo,
            "ecs.gn5-c4g1.xlarge",
            Some("ecs.gn5"),
        );
        let kept = Billing::from_model(&gn5.model(), "ecs.gn5-c4g1.xlarge", false);
        assert_eq!(kept, gn5);
        assert!(!kept.stop_saves());
        let prepaid = Billing::of(Cloud::Tencent, Charge::Subscription, "GN7.2XLARGE32", None);
        let stopped = Billing::from_model(&prepaid.model(), "GN7.2XLARGE32", true);
        assert_eq!(
            (stopped.cloud, stopped.charge),
            (Cloud::Tencent, Charge::Subscription)
        );
        assert_eq!(stopped.stopped_mode, Some(StoppedMode::Unknown));
        let ec2 = Billing::from_model(&Billing::EC2.model(), "g5.xlarge", true);
        assert_eq!(ec2, Billing::ec2(true));
    }

    #[test]
    fn a_stop_in_no_charge_mode_or_of_an_ec2_box_with_an_amazon_address_gives_up_the_public_ip() {
        let of = |cloud, charge, ty, family| Billing::of(cloud, charge, ty, family);
        let pay = Charge::PayAsYouGo;
        let gn7 = of(
            Cloud::Alibaba,
            pay,
            "ecs.gn7i-c8g1.2xlarge",
            Some("ecs.gn7i"),
        );
        assert!(gn7.stop_releases_public_ip());
        assert!(of(Cloud::Tencent, pay, "GN7.2XLARGE32", None).stop_releases_public_ip());
        // A stop that keeps charging keeps the address.
        let gn5 = of(Cloud::Alibaba, pay, "ecs.gn5-c4g1.xlarge", Some("ecs.gn5"));
        assert!(!gn5.stop_releases_public_ip());
        let prepaid = of(Cloud::Tencent, Charge::Subscription, "GN7.2XLARGE32", None);
        assert!(!prepaid.stop_releases_public_ip());
        // An EC2 box with an Elastic IP, or none, keeps what it has; one with an address from
        // Amazon's pool gets another at its next start.
        assert!(!Billing::EC2.stop_releases_public_ip());
        let pooled = Billing {
            public_ip_from_pool: true,
            ..Billing::EC2
        };
        assert!(pooled.stop_releases_public_ip());
    }

    #[test]
    fn every_line_of_the_families_file_is_read() {
        let lines = FAMILIES_FILE
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .count();
        assert_eq!(FAMILIES.len(), lines, "a line names an unknown cloud");
        assert!(FAMILIES.iter().all(|f| !f.pattern.is_empty()));
        for cloud in [Cloud::Alibaba, Cloud::Tencent] {
            assert!(
                FAMILIES.iter().any(|f| f.cloud == cloud),
                "{cloud:?} has families"
            );
        }
    }

    #[test]
    fn local_disk_families_are_listed_and_cloud_disk_ones_are_not() {
        assert_eq!(
            charging_family(Cloud::Alibaba, "ecs.i2g.2xlarge", None),
            Some("ecs.i2*")
        );
        assert_eq!(
            charging_family(Cloud::Alibaba, "ecs.d1ne.4xlarge", None),
            Some("ecs.d1*")
        );
        assert_eq!(
            charging_family(Cloud::Alibaba, "ecs.gn5-c8g1.2xlarge", None),
            Some("ecs.gn5"),
            "ecs.gn5-c8g1.2xlarge is of family ecs.gn5"
        );
        assert_eq!(
            charging_family(Cloud::Alibaba, "ecs.gn5-c8g1.2xlarge", Some("ecs.gn5")),
            Some("ecs.gn5"),
            "the family ECS says"
        );
        assert_eq!(
            charging_family(Cloud::Alibaba, "ecs.gn5i-c4g1.xlarge", Some("ecs.gn5i")),
            None,
            "gn5i has no local disks"
        );
        assert_eq!(
            charging_family(Cloud::Alibaba, "ecs.gn5.2xlarge", None),
            Some("ecs.gn5")
        );
        assert_eq!(
            charging_family(Cloud::Alibaba, "ecs.gn7i-c8g1.2xlarge", None),
            None
        );
        assert_eq!(charging_family(Cloud::Alibaba, "ecs.ic5.large", None), None);
        assert_eq!(
            charging_family(Cloud::Alibaba, "ecs.gn5i-c4g1.xlarge", None),
            None
        );
        assert_eq!(
            charging_family(Cloud::Tencent, "IT5.4XLARGE64", None),
            Some("IT5*")
        );
        assert_eq!(charging_family(Cloud::Tencent, "GN7.2XLARGE32", None), None);
        assert_eq!(
            charging_family(Cloud::Aws, "i3.xlarge", None),
            None,
            "EC2 lists none"
        );
    }

    #[test]
    fn a_stop_saves_only_on_pay_as_you_go_families_that_stop_without_charge() {
        let gpu = Billing::of(
            Cloud::Alibaba,
            Charge::PayAsYouGo,
            "ecs.gn7i-c8g1.2xlarge",
            None,
        );
        assert_eq!(gpu.stop_saving, StopSaving::InNoChargeMode);
        assert!(gpu.stop_saves());
        let local = Billing::of(Cloud::Alibaba, Charge::PayAsYouGo, "ecs.i2.xlarge", None);
        assert!(!local.stop_saves());
        let prepaid = Billing::of(
            Cloud::Alibaba,
            Charge::Subscription,
            "ecs.gn7i-c8g1.2xlarge",
            None,
        );
        assert!(!prepaid.stop_saves());
        assert!(Billing::EC2.stop_saves());
        assert_eq!(Billing::ec2(true).stopped_mode, Some(StoppedMode::NoCharge));
        assert_eq!(Billing::ec2(false).stopped_mode, None);
    }
}
