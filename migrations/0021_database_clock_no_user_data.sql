-- When each open intent was committed, on the database's clock: the in-flight window before a
-- lost answer is resolved from the instance's real state is measured on the clock every
-- replica shares, not on the clock of whichever host reads it. Intents open at the upgrade
-- take their own time.
ALTER TABLE open_intents ADD COLUMN recorded_at timestamptz;
UPDATE open_intents AS o SET recorded_at = a.at FROM audit_log AS a WHERE a.seq = o.seq;
ALTER TABLE open_intents ALTER COLUMN recorded_at SET DEFAULT now(),
                         ALTER COLUMN recorded_at SET NOT NULL;

-- An instance's user data often holds secrets; it is read again from the instance at each
-- launch, never kept.
UPDATE spot_migrations SET launch_spec = launch_spec - 'user_data'
WHERE launch_spec IS NOT NULL;
