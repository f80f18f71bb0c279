-- A user's e-mail address (optional): what S3's grants by e-mail address (emailAddress="...",
-- AmazonCustomerByEmail) name. The gateway resolves an address to its user when an ACL is written, and the
-- ACL keeps the user name. Unique whatever its case, as an address is matched (lower(email)); NULL: none.
ALTER TABLE users ADD COLUMN email text;
CREATE UNIQUE INDEX users_email_key ON users (lower(email)) WHERE email IS NOT NULL;
