-- The members ebb protected from their group's scale-in under group.protect_members
-- (engine/group.rs), or may have (the answer lost): ebb takes the protection off again at the
-- restore, and only from them, never from a member the group's owner protected.
ALTER TABLE scaling_groups ADD COLUMN protected text[] NOT NULL DEFAULT '{}';
