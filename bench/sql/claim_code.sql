-- Claim one unit code of a CODES SKU, skipping rows other clients hold locked.
UPDATE codes SET status = 'held', reservation_line_id = :codeline, updated_at = now() WHERE id = (SELECT id FROM codes WHERE sku_id = :codesku AND location_id = :loc AND status = 'available' ORDER BY batch_id, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id;
