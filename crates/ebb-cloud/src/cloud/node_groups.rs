//! What EKS says of a change of a managed node group's scaling config: UpdateNodegroupConfig
//! answers with an update id, and the change is done only once DescribeUpdate says so.

/// An EKS update of a node group, as DescribeUpdate tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGroupUpdate {
    /// Where the update is.
    pub status: UpdateStatus,
    /// What EKS says went wrong, for an update that failed or was cancelled (`code: message`).
    pub errors: Vec<String>,
}

/// The status of an EKS update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateStatus {
    /// Still being carried out: asked again at the next tick.
    InProgress,
    /// Done.
    Successful,
    /// EKS could not carry it out.
    Failed,
    /// Cancelled before it was done.
    Cancelled,
}

impl UpdateStatus {
    /// As EKS writes it (`InProgress`).
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateStatus::InProgress => "InProgress",
            UpdateStatus::Successful => "Successful",
            UpdateStatus::Failed => "Failed",
            UpdateStatus::Cancelled => "Cancelled",
        }
    }
}

impl std::fmt::Display for UpdateStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
