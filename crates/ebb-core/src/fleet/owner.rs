//! Who owns an instance besides ebb, read from its tags: on AWS an Auto Scaling group, an EKS
//! managed node group, Karpenter, SkyPilot, AWS Batch, a Spot Fleet or an EC2 Fleet; on Alibaba
//! Cloud an Auto Scaling (ESS) group or an ACK cluster's node pool; on Tencent Cloud an Auto
//! Scaling group or a TKE cluster's node pool. Such an owner replaces or breaks an instance
//! stopped under it, so ebb never acts on one alone.
//!
//! [`Owner::of`] is the one place an owner is derived from tags; everything else (the engine,
//! the re-check before a call, spot migrations, the store, the output) asks it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The tag EC2 Auto Scaling puts on each member of a group: the group's name.
pub const ASG_TAG: &str = "aws:autoscaling:groupName";
/// The tag EKS puts on each node of a managed node group: the node group's name.
pub const EKS_NODEGROUP_TAG: &str = "eks:nodegroup-name";
/// The tag EKS puts beside [`EKS_NODEGROUP_TAG`]: the cluster's name.
pub const EKS_CLUSTER_TAG: &str = "eks:cluster-name";
/// The tag Karpenter (v0.32 and later) puts on each node it launches: the NodePool's name.
pub const KARPENTER_NODEPOOL_TAG: &str = "karpenter.sh/nodepool";
/// The tag older Karpenter releases put instead: the Provisioner's name.
pub const KARPENTER_PROVISIONER_TAG: &str = "karpenter.sh/provisioner-name";
/// The tag SkyPilot puts on each instance of a cluster: the cluster's name.
pub const SKYPILOT_TAG: &str = "skypilot-cluster-name";
/// The tag AWS Batch puts on the instances of a managed compute environment.
pub const BATCH_TAG: &str = "aws:batch:compute-environment";
/// The tag a Spot Fleet request puts on the instances it launches.
pub const SPOT_FLEET_TAG: &str = "aws:ec2spot:fleet-request-id";
/// The tag an EC2 Fleet puts on the instances it launches.
pub const EC2_FLEET_TAG: &str = "aws:ec2:fleet-id";
/// The tag Alibaba Cloud Auto Scaling (ESS) puts on each instance of a scaling group: its id.
pub const ESS_TAG: &str = "acs:autoscaling:scalingGroupId";
/// The tag ACK puts on each node of a cluster: the cluster's id.
pub const ACK_CLUSTER_TAG: &str = "ack.aliyun.com";
/// The tag ACK puts on each node of a node pool: the node pool's id.
pub const ACK_NODEPOOL_TAG: &str = "ack.alibabacloud.com/nodepool-id";
/// The tag Tencent Cloud Auto Scaling puts on each instance of a scaling group: its id.
pub const TENCENT_AS_TAG: &str = "tencentcloud:autoscaling:auto-scaling-group-id";
/// The tag TKE puts on the resources of a cluster: the cluster's id.
pub const TKE_CLUSTER_TAG: &str = "tke-clusterId";
/// The tag TKE puts on each node of a node pool: the node pool's id.
pub const TKE_NODEPOOL_TAG: &str = "tke-nodepool-id";

/// The prefixes of the tags only a cloud can write (AWS's, Alibaba Cloud's and Tencent Cloud's
/// system tags): any of them that is not known to be harmless may mean an owner ebb has not
/// heard of.
const SYSTEM_PREFIXES: &[&str] = &["aws:", "acs:", "tencentcloud:"];

/// The `aws:` tags known not to mean an owner: they record how an instance was made, and nothing
/// replaces an instance that carries them when it stops. A plain CloudFormation instance stays
/// ebb's to manage (the stack does not restart or replace a stopped instance).
pub const NOT_OWNER_PREFIXES: &[&str] = &[
    // The stack, logical id and stack id of a CloudFormation stack's instance.
    "aws:cloudformation:",
    // The launch template (id, version) an instance was launched from.
    "aws:ec2launchtemplate:",
    // The Service Catalog product provisioned as a CloudFormation stack.
    "aws:servicecatalog:",
];

/// What owns an instance besides ebb. Variants carry what a later scheduling of the owner
/// itself needs (the group, the cluster and node group).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Owner {
    /// A member of an EC2 Auto Scaling group: the group replaces a member it finds stopped.
    Asg {
        /// The group's name.
        group: String,
    },
    /// A node of an EKS managed node group (also a member of the node group's Auto Scaling
    /// group, which EKS manages: EKS wins).
    EksNodegroup {
        /// The EKS cluster.
        cluster: String,
        /// The node group.
        nodegroup: String,
        /// The node group's Auto Scaling group, when tagged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
    },
    /// A node Karpenter launched: it terminates a node whose instance stops.
    Karpenter {
        /// The NodePool (or, before Karpenter v0.32, the Provisioner).
        nodepool: String,
    },
    /// An instance of a SkyPilot cluster: stopped or started outside SkyPilot, it comes back
    /// broken.
    Skypilot {
        /// The SkyPilot cluster.
        cluster: String,
    },
    /// An instance of an AWS Batch managed compute environment.
    Batch {
        /// The compute environment.
        compute_environment: String,
    },
    /// An instance of a Spot Fleet request, which replaces what it loses.
    SpotFleet {
        /// The Spot Fleet request id (`sfr-...`).
        request: String,
    },
    /// An instance of an EC2 Fleet, which replaces what it loses.
    Ec2Fleet {
        /// The fleet id (`fleet-...`).
        fleet: String,
    },
    /// An instance of an Alibaba Cloud Auto Scaling (ESS) scaling group, which replaces an
    /// instance it finds unhealthy.
    Ess {
        /// The scaling group's id.
        group: String,
    },
    /// A node of an ACK cluster, of a node pool when tagged (a node pool's instances are also
    /// in its ESS scaling group, which ACK manages: ACK wins).
    AckNode {
        /// The cluster's id.
        cluster: String,
        /// The node pool's id, when tagged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nodepool: Option<String>,
        /// The node pool's scaling group, when tagged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
    },
    /// An instance of a Tencent Cloud Auto Scaling group, which replaces an instance it finds
    /// unhealthy.
    TencentAs {
        /// The scaling group's id.
        group: String,
    },
    /// A node of a TKE cluster, of a node pool when tagged (a node pool's instances are also in
    /// its Auto Scaling group, which TKE manages: TKE wins).
    TkeNode {
        /// The cluster's id.
        cluster: String,
        /// The node pool's id, when tagged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nodepool: Option<String>,
        /// The node pool's scaling group, when tagged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
    },
    /// A system tag (`aws:`, `acs:`, `tencentcloud:`) ebb does not know, which may mean an
    /// owner: taken as one.
    Unknown {
        /// The tag's key.
        tag: String,
        /// Its value.
        value: String,
    },
}

/// The kind of an [`Owner`], without its names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OwnerKind {
    /// [`Owner::Asg`].
    Asg,
    /// [`Owner::EksNodegroup`].
    EksNodegroup,
    /// [`Owner::Karpenter`].
    Karpenter,
    /// [`Owner::Skypilot`].
    Skypilot,
    /// [`Owner::Batch`].
    Batch,
    /// [`Owner::SpotFleet`].
    SpotFleet,
    /// [`Owner::Ec2Fleet`].
    Ec2Fleet,
    /// [`Owner::Ess`].
    Ess,
    /// [`Owner::AckNode`].
    AckNode,
    /// [`Owner::TencentAs`].
    TencentAs,
    /// [`Owner::TkeNode`].
    TkeNode,
    /// [`Owner::Unknown`].
    Unknown,
}

impl OwnerKind {
    /// Every kind, in the order owners are looked for.
    pub const ALL: [OwnerKind; 12] = [
        OwnerKind::EksNodegroup,
        OwnerKind::AckNode,
        OwnerKind::TkeNode,
        OwnerKind::Karpenter,
        OwnerKind::Batch,
        OwnerKind::Skypilot,
        OwnerKind::Asg,
        OwnerKind::Ess,
        OwnerKind::TencentAs,
        OwnerKind::SpotFleet,
        OwnerKind::Ec2Fleet,
        OwnerKind::Unknown,
    ];

    /// The stable name (JSON, Postgres, tables).
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerKind::Asg => "asg",
            OwnerKind::EksNodegroup => "eks_nodegroup",
            OwnerKind::Karpenter => "karpenter",
            OwnerKind::Skypilot => "skypilot",
            OwnerKind::Batch => "batch",
            OwnerKind::SpotFleet => "spot_fleet",
            OwnerKind::Ec2Fleet => "ec2_fleet",
            OwnerKind::Ess => "ess",
            OwnerKind::AckNode => "ack_node",
            OwnerKind::TencentAs => "tencent_as",
            OwnerKind::TkeNode => "tke_node",
            OwnerKind::Unknown => "unknown",
        }
    }

    /// What the owner offers instead of ebb's stops, for reasons and the manual.
    pub fn instead(self) -> &'static str {
        match self {
            OwnerKind::Asg => "scale the group itself (its minimum and desired capacity) off-hours",
            OwnerKind::EksNodegroup => {
                "scale the node group itself (its minimum and desired size) off-hours"
            }
            OwnerKind::Karpenter => {
                "use the NodePool's limits and disruption budgets (consolidation removes empty nodes)"
            }
            OwnerKind::Skypilot => "use SkyPilot's autostop (sky autostop)",
            OwnerKind::Batch => "set the compute environment's minimum vCPUs to 0",
            OwnerKind::SpotFleet | OwnerKind::Ec2Fleet => "lower the fleet's target capacity",
            OwnerKind::Ess | OwnerKind::TencentAs => {
                "scale the scaling group itself (its minimum and desired capacity) off-hours"
            }
            OwnerKind::AckNode | OwnerKind::TkeNode => {
                "scale the node pool itself (its desired nodes) off-hours"
            }
            OwnerKind::Unknown => {
                "find what set the tag and stop the instance through it, or remove the tag if nothing owns the instance"
            }
        }
    }
}

impl fmt::Display for OwnerKind {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Owner {
    /// The owner `tags` name, if any. Several may: an EKS node group's instances are also
    /// members of its Auto Scaling group (an ACK or TKE node pool's, of its scaling group),
    /// Karpenter and Batch launch through fleets; the most specific wins (the order of
    /// [`OwnerKind::ALL`]). Any other system tag (`aws:`, `acs:`, `tencentcloud:`) not in
    /// [`NOT_OWNER_PREFIXES`] is an unknown owner, the first in key order.
    pub fn of<'a>(tags: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<Owner> {
        let (mut found, mut unknown): (Vec<Owner>, Option<Owner>) = (Vec::new(), None);
        // The tags that only name an owner together with others.
        let (mut eks_cluster, mut asg) = (None, None);
        let (mut ack_cluster, mut ack_pool, mut ess) = (None, None, None);
        let (mut tke_cluster, mut tke_pool, mut tencent_as) = (None, None, None);
        for (key, value) in tags {
            let name = value.to_string();
            match key {
                ASG_TAG => asg = Some(name),
                EKS_CLUSTER_TAG => eks_cluster = Some(name),
                EKS_NODEGROUP_TAG => found.push(Owner::EksNodegroup {
                    cluster: String::new(),
                    nodegroup: name,
                    group: None,
                }),
                KARPENTER_NODEPOOL_TAG | KARPENTER_PROVISIONER_TAG => {
                    found.push(Owner::Karpenter { nodepool: name })
                }
                SKYPILOT_TAG => found.push(Owner::Skypilot { cluster: name }),
                BATCH_TAG => found.push(Owner::Batch {
                    compute_environment: name,
                }),
                SPOT_FLEET_TAG => found.push(Owner::SpotFleet { request: name }),
                EC2_FLEET_TAG => found.push(Owner::Ec2Fleet { fleet: name }),
                ESS_TAG => ess = Some(name),
                ACK_CLUSTER_TAG => ack_cluster = Some(name),
                ACK_NODEPOOL_TAG => ack_pool = Some(name),
                TENCENT_AS_TAG => tencent_as = Some(name),
                TKE_CLUSTER_TAG => tke_cluster = Some(name),
                TKE_NODEPOOL_TAG => tke_pool = Some(name),
                _ if unknown.is_none()
                    && SYSTEM_PREFIXES.iter().any(|p| key.starts_with(p))
                    && !NOT_OWNER_PREFIXES.iter().any(|p| key.starts_with(p)) =>
                {
                    unknown = Some(Owner::Unknown {
                        tag: key.to_string(),
                        value: name,
                    })
                }
                _ => {}
            }
        }
        // A node pool's node without its cluster's tag is still the node pool's.
        if ack_cluster.is_some() || ack_pool.is_some() {
            found.push(Owner::AckNode {
                cluster: ack_cluster.unwrap_or_default(),
                nodepool: ack_pool,
                group: ess.clone(),
            });
        }
        if tke_cluster.is_some() || tke_pool.is_some() {
            found.push(Owner::TkeNode {
                cluster: tke_cluster.unwrap_or_default(),
                nodepool: tke_pool,
                group: tencent_as.clone(),
            });
        }
        found.extend(asg.clone().map(|group| Owner::Asg { group }));
        found.extend(ess.map(|group| Owner::Ess { group }));
        found.extend(tencent_as.map(|group| Owner::TencentAs { group }));
        found.extend(unknown);
        let mut owner = found
            .into_iter()
            .min_by_key(|o| OwnerKind::ALL.iter().position(|k| *k == o.kind()))?;
        if let Owner::EksNodegroup {
            cluster: c,
            group: g,
            ..
        } = &mut owner
        {
            *c = eks_cluster.unwrap_or_default();
            *g = asg;
        }
        Some(owner)
    }

    /// Its kind.
    pub fn kind(&self) -> OwnerKind {
        match self {
            Owner::Asg { .. } => OwnerKind::Asg,
            Owner::EksNodegroup { .. } => OwnerKind::EksNodegroup,
            Owner::Karpenter { .. } => OwnerKind::Karpenter,
            Owner::Skypilot { .. } => OwnerKind::Skypilot,
            Owner::Batch { .. } => OwnerKind::Batch,
            Owner::SpotFleet { .. } => OwnerKind::SpotFleet,
            Owner::Ec2Fleet { .. } => OwnerKind::Ec2Fleet,
            Owner::Ess { .. } => OwnerKind::Ess,
            Owner::AckNode { .. } => OwnerKind::AckNode,
            Owner::TencentAs { .. } => OwnerKind::TencentAs,
            Owner::TkeNode { .. } => OwnerKind::TkeNode,
            Owner::Unknown { .. } => OwnerKind::Unknown,
        }
    }

    /// The tags that mean this owner, as EC2 and the owner write them: what [`Owner::of`]
    /// reads back as this owner.
    pub fn tags(&self) -> Vec<(String, String)> {
        let tag = |key: &str, value: &str| (key.to_string(), value.to_string());
        match self {
            Owner::Asg { group } => vec![tag(ASG_TAG, group)],
            Owner::EksNodegroup {
                cluster,
                nodegroup,
                group,
            } => [
                Some(tag(EKS_CLUSTER_TAG, cluster)),
                Some(tag(EKS_NODEGROUP_TAG, nodegroup)),
                group.as_ref().map(|g| tag(ASG_TAG, g)),
            ]
            .into_iter()
            .flatten()
            .collect(),
            Owner::Karpenter { nodepool } => vec![tag(KARPENTER_NODEPOOL_TAG, nodepool)],
            Owner::Skypilot { cluster } => vec![tag(SKYPILOT_TAG, cluster)],
            Owner::Batch {
                compute_environment,
            } => vec![tag(BATCH_TAG, compute_environment)],
            Owner::SpotFleet { request } => vec![tag(SPOT_FLEET_TAG, request)],
            Owner::Ec2Fleet { fleet } => vec![tag(EC2_FLEET_TAG, fleet)],
            Owner::Ess { group } => vec![tag(ESS_TAG, group)],
            Owner::TencentAs { group } => vec![tag(TENCENT_AS_TAG, group)],
            Owner::AckNode {
                cluster,
                nodepool,
                group,
            } => [
                Some(tag(ACK_CLUSTER_TAG, cluster)),
                nodepool.as_ref().map(|p| tag(ACK_NODEPOOL_TAG, p)),
                group.as_ref().map(|g| tag(ESS_TAG, g)),
            ]
            .into_iter()
            .flatten()
            .collect(),
            Owner::TkeNode {
                cluster,
                nodepool,
                group,
            } => [
                Some(tag(TKE_CLUSTER_TAG, cluster)),
                nodepool.as_ref().map(|p| tag(TKE_NODEPOOL_TAG, p)),
                group.as_ref().map(|g| tag(TENCENT_AS_TAG, g)),
            ]
            .into_iter()
            .flatten()
            .collect(),
            Owner::Unknown { tag: key, value } => vec![tag(key, value)],
        }
    }

    /// Its name as the owner knows it (`cluster/nodegroup` for an EKS node group; the tag's
    /// value for an unknown owner).
    pub fn name(&self) -> String {
        match self {
            Owner::Asg { group } => group.clone(),
            Owner::EksNodegroup {
                cluster, nodegroup, ..
            } => format!("{cluster}/{nodegroup}"),
            Owner::Karpenter { nodepool } => nodepool.clone(),
            Owner::Skypilot { cluster } => cluster.clone(),
            Owner::Batch {
                compute_environment,
            } => compute_environment.clone(),
            Owner::SpotFleet { request } => request.clone(),
            Owner::Ec2Fleet { fleet } => fleet.clone(),
            Owner::Ess { group } | Owner::TencentAs { group } => group.clone(),
            Owner::AckNode {
                cluster, nodepool, ..
            }
            | Owner::TkeNode {
                cluster, nodepool, ..
            } => match nodepool {
                Some(pool) => format!("{cluster}/{pool}"),
                None => cluster.clone(),
            },
            Owner::Unknown { value, .. } => value.clone(),
        }
    }
}

/// For people: `Auto Scaling group inference`, `the aws:foo:bar tag (value x)`.
impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Owner::Asg { group } => write!(f, "Auto Scaling group {group}"),
            Owner::EksNodegroup {
                cluster, nodegroup, ..
            } => write!(f, "EKS node group {nodegroup} of cluster {cluster}"),
            Owner::Karpenter { nodepool } => write!(f, "Karpenter NodePool {nodepool}"),
            Owner::Skypilot { cluster } => write!(f, "SkyPilot cluster {cluster}"),
            Owner::Batch {
                compute_environment,
            } => write!(f, "AWS Batch compute environment {compute_environment}"),
            Owner::SpotFleet { request } => write!(f, "Spot Fleet request {request}"),
            Owner::Ec2Fleet { fleet } => write!(f, "EC2 Fleet {fleet}"),
            Owner::Ess { group } => write!(f, "Alibaba Cloud Auto Scaling group {group}"),
            Owner::TencentAs { group } => write!(f, "Tencent Cloud Auto Scaling group {group}"),
            Owner::AckNode {
                cluster,
                nodepool: Some(pool),
                ..
            } => write!(f, "ACK node pool {pool} of cluster {cluster}"),
            Owner::AckNode { cluster, .. } => write!(f, "ACK cluster {cluster}"),
            Owner::TkeNode {
                cluster,
                nodepool: Some(pool),
                ..
            } => write!(f, "TKE node pool {pool} of cluster {cluster}"),
            Owner::TkeNode { cluster, .. } => write!(f, "TKE cluster {cluster}"),
            Owner::Unknown { tag, value } => {
                write!(f, "an owner ebb does not know (tag {tag}={value})")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(tags: &[(&str, &str)]) -> Option<Owner> {
        Owner::of(tags.iter().copied())
    }

    #[test]
    fn each_owner_tag_names_its_owner() {
        let asg = || Owner::Asg { group: "g".into() };
        assert_eq!(owner(&[(ASG_TAG, "g")]), Some(asg()));
        assert_eq!(
            owner(&[(KARPENTER_NODEPOOL_TAG, "gpu")]),
            Some(Owner::Karpenter {
                nodepool: "gpu".into()
            })
        );
        assert_eq!(
            owner(&[(KARPENTER_PROVISIONER_TAG, "old")]),
            Some(Owner::Karpenter {
                nodepool: "old".into()
            })
        );
        assert_eq!(
            owner(&[(SKYPILOT_TAG, "sky-1")]),
            Some(Owner::Skypilot {
                cluster: "sky-1".into()
            })
        );
        assert_eq!(
            owner(&[(BATCH_TAG, "ce")]),
            Some(Owner::Batch {
                compute_environment: "ce".into()
            })
        );
        assert_eq!(
            owner(&[(SPOT_FLEET_TAG, "sfr-1")]),
            Some(Owner::SpotFleet {
                request: "sfr-1".into()
            })
        );
        assert_eq!(
            owner(&[(EC2_FLEET_TAG, "fleet-1")]),
            Some(Owner::Ec2Fleet {
                fleet: "fleet-1".into()
            })
        );
        assert_eq!(owner(&[("team", "ml"), ("Name", "box")]), None);
    }

    #[test]
    fn the_most_specific_owner_wins() {
        // An EKS managed node is also a member of the node group's Auto Scaling group.
        assert_eq!(
            owner(&[
                (ASG_TAG, "eks-gpu-1234"),
                (EKS_CLUSTER_TAG, "prod"),
                (EKS_NODEGROUP_TAG, "gpu"),
            ]),
            Some(Owner::EksNodegroup {
                cluster: "prod".into(),
                nodegroup: "gpu".into(),
                group: Some("eks-gpu-1234".into()),
            })
        );
        // Karpenter launches through EC2 Fleet; Batch through a group or a fleet.
        assert_eq!(
            owner(&[(EC2_FLEET_TAG, "fleet-1"), (KARPENTER_NODEPOOL_TAG, "p")]).map(|o| o.kind()),
            Some(OwnerKind::Karpenter)
        );
        assert_eq!(
            owner(&[(ASG_TAG, "g"), (BATCH_TAG, "ce"), ("aws:x:y", "z")]).map(|o| o.kind()),
            Some(OwnerKind::Batch)
        );
    }

    #[test]
    fn an_unknown_aws_tag_is_an_owner_but_not_cloudformations() {
        assert_eq!(
            owner(&[("aws:elasticmapreduce:job-flow-id", "j-1")]),
            Some(Owner::Unknown {
                tag: "aws:elasticmapreduce:job-flow-id".into(),
                value: "j-1".into()
            })
        );
        assert_eq!(
            owner(&[
                ("aws:cloudformation:stack-name", "s"),
                ("aws:cloudformation:logical-id", "Box"),
                ("aws:ec2launchtemplate:id", "lt-1"),
                ("aws:servicecatalog:productArn", "arn"),
            ]),
            None
        );
        // A user's tag that merely mentions aws is not AWS's.
        assert_eq!(owner(&[("team:aws:x", "y"), ("AWS-notes", "z")]), None);
    }

    #[test]
    fn owners_read_and_write_as_json_with_their_kind() {
        let o = Owner::EksNodegroup {
            cluster: "prod".into(),
            nodegroup: "gpu".into(),
            group: None,
        };
        let json = serde_json::to_string(&o).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"eks_nodegroup","cluster":"prod","nodegroup":"gpu"}"#
        );
        assert_eq!(serde_json::from_str::<Owner>(&json).unwrap(), o);
    }

    #[test]
    fn an_owners_tags_read_back_as_that_owner() {
        let owners = [
            Owner::Asg { group: "g".into() },
            Owner::EksNodegroup {
                cluster: "c".into(),
                nodegroup: "n".into(),
                group: Some("g".into()),
            },
            Owner::Karpenter {
                nodepool: "p".into(),
            },
            Owner::Skypilot {
                cluster: "s".into(),
            },
            Owner::Batch {
                compute_environment: "ce".into(),
            },
            Owner::SpotFleet {
                request: "sfr-1".into(),
            },
            Owner::Ec2Fleet {
                fleet: "fleet-1".into(),
            },
            Owner::Ess {
                group: "asg-1".into(),
            },
            Owner::TencentAs {
                group: "asg-2".into(),
            },
            Owner::AckNode {
                cluster: "c1".into(),
                nodepool: Some("np1".into()),
                group: Some("asg-1".into()),
            },
            Owner::TkeNode {
                cluster: "cls-1".into(),
                nodepool: None,
                group: None,
            },
            Owner::Unknown {
                tag: "aws:emr:x".into(),
                value: "y".into(),
            },
        ];
        for o in owners {
            let tags = o.tags();
            let read = Owner::of(tags.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            assert_eq!(read, Some(o));
        }
    }
}
