-- How each instance is billed, as its listing said (`fleet::BillingModel`: its cloud, how it
-- is paid, and the families file's pattern when a stop keeps it charging), so that replay,
-- advise and the console's explanations from Postgres bill an Alibaba Cloud or Tencent Cloud
-- box as its cloud does. NULL for a row not listed since: billed as EC2 bills, as before.
ALTER TABLE instances ADD COLUMN billing jsonb;
