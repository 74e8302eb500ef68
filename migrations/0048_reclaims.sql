-- Boxes reclaimed after a long stop (`stopped.reclaim_after`), one row per reclaim: the
-- notice, the image of all the box's volumes (proven before anything is terminated), the
-- termination, and a restore from the image when someone asks (`ebb restore`). What a restore
-- launches with is recorded here, since the box it copies is gone by then.
CREATE TABLE reclaims (
    id                bigserial PRIMARY KEY,
    instance          text NOT NULL,
    region            text NOT NULL,
    policy            text NOT NULL,
    state             text NOT NULL CHECK (state IN ('noticed', 'imaging', 'reclaimed',
                          'restoring', 'restored', 'held', 'refused')),
    -- When the box stopped, as its listing said: a stop after it is another stop, and ends
    -- this reclaim.
    stopped_since     timestamptz NOT NULL,
    -- Not before then is its image made: its notice's end.
    due_at            timestamptz NOT NULL,
    image             text,
    -- The image's snapshots, once it is available.
    snapshots         text[] NOT NULL DEFAULT '{}',
    -- How the box was launched (its type, subnet, security groups, profile, key, tags,
    -- volumes), read before its image is made; no user data.
    launch_spec       jsonb,
    terminated_at     timestamptz,
    restore_asked_at  timestamptz,
    restore_asked_by  text,
    restored_as       text,
    -- When the image was deregistered (`keep_image_for` after the restored box came up); its
    -- snapshots not deleted yet stay in `snapshots`.
    image_deleted_at  timestamptz,
    -- Why it was held or refused, for people.
    error             text,
    created_at        timestamptz NOT NULL,
    state_since       timestamptz NOT NULL,
    ended_at          timestamptz
);
-- One reclaim under way per box.
CREATE UNIQUE INDEX reclaims_one_open ON reclaims (instance) WHERE ended_at IS NULL;
