-- The same conditional claim, every client on one SKU (a flash sale).
WITH c AS (UPDATE balances SET reserved = reserved + 1 WHERE sku_id = :hotsku AND location_id = :loc AND on_hand - reserved >= 1 RETURNING sku_id, location_id, reserved) SELECT * FROM c;
