-- The conditional claim at the heart of reserve, on one of 10,000 SKUs.
\set sku random(:minsku, :maxsku)
WITH c AS (UPDATE balances SET reserved = reserved + 1 WHERE sku_id = :sku AND location_id = :loc AND on_hand - reserved >= 1 RETURNING sku_id, location_id, reserved) SELECT * FROM c;
