-- An instance's page reads that instance's overrides (`Store::overrides_of`), newest first:
-- an index, so the page reads those rows and not the whole table.
CREATE INDEX overrides_by_instance ON overrides (instance, id DESC);
