-- Seed rows: literal values only.
INSERT INTO users (id, login, name) VALUES
  (1, 'ana', 'Ana Lima'),
  (2, 'bo', 'Bo Chen'),
  (3, 'cy', 'Cy Okafor');

INSERT INTO notes (id, author_id, body, pinned, created_at, updated_at) VALUES
  (1, 1, 'Standup moves to 10:00', 1, '2025-06-02T09:00:00', NULL),
  (2, 1, 'Buy milk', 0, '2025-06-10T09:00:00', NULL),
  (3, 2, 'Release checklist: tag, build, announce', 1, '2025-06-12T09:00:00', NULL),
  (4, 2, 'Old idea; it''s obsolete', 0, '2025-06-20T09:00:00', NULL),
  (5, 3, 'Welcome notes for new people', 0, '2025-06-25T09:00:00', NULL);
