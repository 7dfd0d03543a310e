-- The reviews service's tables, as its database holds them (the service ships no migrations).
CREATE TABLE users (id INTEGER PRIMARY KEY, login TEXT NOT NULL, name TEXT NOT NULL, email TEXT NOT NULL);
CREATE INDEX users_login ON users (login);
CREATE TABLE repositories (id INTEGER PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL);
CREATE INDEX repositories_name ON repositories (name);
CREATE TABLE memberships (id INTEGER PRIMARY KEY, repository_id INTEGER NOT NULL REFERENCES repositories (id),
  user_id INTEGER NOT NULL REFERENCES users (id), role TEXT NOT NULL);
CREATE INDEX memberships_repo_user ON memberships (repository_id, user_id);
CREATE TABLE pull_requests (id INTEGER PRIMARY KEY, repository_id INTEGER NOT NULL REFERENCES repositories (id),
  number INTEGER NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL, author_id INTEGER NOT NULL REFERENCES users (id),
  state TEXT NOT NULL, created_at TEXT NOT NULL, merged_at TEXT, merged_by INTEGER REFERENCES users (id), closed_at TEXT);
CREATE INDEX pull_requests_repo_number ON pull_requests (repository_id, number);
CREATE TABLE comments (id INTEGER PRIMARY KEY, pull_request_id INTEGER NOT NULL REFERENCES pull_requests (id),
  author_id INTEGER NOT NULL REFERENCES users (id), body TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX comments_pull ON comments (pull_request_id);
CREATE TABLE reviews (id INTEGER PRIMARY KEY, pull_request_id INTEGER NOT NULL REFERENCES pull_requests (id),
  reviewer_id INTEGER NOT NULL REFERENCES users (id), verdict TEXT NOT NULL, body TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX reviews_pull ON reviews (pull_request_id);
CREATE TABLE labels (id INTEGER PRIMARY KEY, pull_request_id INTEGER NOT NULL REFERENCES pull_requests (id),
  name TEXT NOT NULL);
CREATE INDEX labels_pull ON labels (pull_request_id);
CREATE TABLE review_requests (id INTEGER PRIMARY KEY, pull_request_id INTEGER NOT NULL REFERENCES pull_requests (id),
  reviewer_id INTEGER NOT NULL REFERENCES users (id), requested_by INTEGER NOT NULL REFERENCES users (id),
  created_at TEXT NOT NULL);
CREATE INDEX review_requests_pull ON review_requests (pull_request_id);
CREATE TABLE notifications (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users (id),
  pull_request_id INTEGER NOT NULL REFERENCES pull_requests (id), kind TEXT NOT NULL, email_ref TEXT,
  created_at TEXT NOT NULL);
CREATE INDEX notifications_pull ON notifications (pull_request_id);
