//! The names ebb writes into the cloud and the audit log, in one place: the tag keys it reads
//! and writes on instances and images, and the audit actor of everything the control loop does.
//! People and IAM policies match on these strings, so they never change.

/// The audit actor of everything a tick does.
pub const ACTOR: &str = "scheduler";

/// `true` excludes the instance from ebb.
pub const SKIP_TAG: &str = "ebb:skip";
/// An RFC 3339 time until which no stop happens.
pub const KEEP_UNTIL_TAG: &str = "ebb:keep-until";
/// `true` lets spot rules move the instance.
pub const INTERRUPTIBLE_TAG: &str = "ebb:interruptible";
/// The RFC 3339 time of the job's last checkpoint.
pub const CHECKPOINT_AT_TAG: &str = "ebb:checkpoint-at";
/// The RFC 3339 time the instance last said a person was using it: a heartbeat, kept as in
/// use for the idle rule's `activity: [{heartbeat: {max_age}}]`.
pub const ACTIVE_AT_TAG: &str = "ebb:active-at";
/// The base URL of the instance's Jupyter Server, at a private address, for the idle rule's
/// `activity: [{jupyter: {}}]`.
pub const JUPYTER_TAG: &str = "ebb:jupyter";
/// Whom the instance's notices are for (an e-mail address or a chat handle): named in each
/// notice, and the audit actor of an override made from one of its snooze links.
pub const OWNER_TAG: &str = "ebb:owner";
/// The tag a notice writes: when the announced stop will happen.
pub const STOP_AT_TAG: &str = "ebb:stop-at";
/// On the original while its spot migration is under way (the migration's id): the rules
/// leave it alone.
pub const MIGRATING_TAG: &str = "ebb:migrating";
/// On every replacement a spot migration launched (the migration's id).
pub const MIGRATION_TAG: &str = "ebb:migration";
/// The tag that names one launch (`<original>-<migration>-<n>`): a repeated launch finds it.
pub const LAUNCH_TAG: &str = "ebb:launch";
/// The tag on a replacement that names the original.
pub const MIGRATED_FROM_TAG: &str = "ebb:migrated-from";
/// The tag on images and snapshots ebb made (the instance they were made of): the IAM policy
/// lets ebb delete only those.
pub const IMAGE_OF_TAG: &str = "ebb:image-of";

/// The tag ebb puts on a capacity reservation it makes, in the CreateCapacityReservation call
/// itself: the reservation's token (also its client token). Only a reservation carrying the
/// token ebb recorded is ever adopted or cancelled as ebb's.
pub const RESERVATION_TAG: &str = "ebb:reservation";

/// The tag naming the instance a capacity reservation ebb made is for.
pub const RESERVED_FOR_TAG: &str = "ebb:reserved-for";

/// On the image of a box ebb reclaims, its snapshots, and the box it restores from that image:
/// the reclaim's id. A lost answer is resolved by it, and it proves what ebb made.
pub const RECLAIM_TAG: &str = "ebb:reclaim";
/// On a box ebb restored from the image of a reclaimed one: the reclaimed box's id.
pub const RESTORED_FROM_TAG: &str = "ebb:restored-from";
