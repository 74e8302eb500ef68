-- The EKS update of a managed node group's pending change (issue 28): UpdateNodegroupConfig
-- answers with an update id, and the change's outcome waits until DescribeUpdate says the
-- update is done. Written after the call, cleared with the outcome; a pending change without
-- one (a crash, a lost answer) is resolved from the node group's scaling config.
ALTER TABLE scaling_groups ADD COLUMN intent_update text;
