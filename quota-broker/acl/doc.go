// Package acl decides what a caller of the broker may do, from the caller's
// own Nomad ACL token (DESIGN §9).
//
// Flow: TokenFromRequest takes the secret from X-Nomad-Token or
// "Authorization: Bearer"; Resolver.Resolve reads GET /v1/acl/token/self
// with that secret, then each policy (/v1/acl/policy/<name>) and each role
// (/v1/acl/role/<id>, then its policies) the token holds; ParseRules reads
// the namespace rules of each policy (HCL or JSON, with hcl/v2); Merge joins
// them into a RuleSet; the Authorizer answers Allowed(namespace, capability)
// and IsAdmin.
//
// The evaluation rules are written from Nomad's public ACL documentation and
// checked against a real Nomad (conformance_test.go), never from Nomad's
// source, which is not open source:
//   - the namespace rules of all the token's policies (direct and through
//     roles) merge per label: capabilities add up;
//   - "deny" on a label (as policy or capability) leaves nothing there;
//   - for a namespace, a rule with exactly its name wins over globs; among
//     matching globs ("*" matches any run of characters), the one with the
//     most literal (non-"*") characters wins; of globs tied on that count,
//     the label greatest in byte order wins (for two labels matching the
//     same name: the one whose first "*" comes later), as Nomad v1.11.3
//     answered in every tie the conformance test tried;
//   - no matching rule gives nothing;
//   - the dispositions read, write and scale expand to capabilities as the
//     Nomad policy API itself expands them (RulesJSON, Nomad v1.11.3).
//
// Fail closed: no token, an expired token, a token Nomad refuses, or any
// error while resolving (Nomad unreachable, a 5xx, an unreadable policy or
// role) gives no rights: ErrDenied (HTTP 403) or ErrUnavailable (HTTP 503).
// ACLs count as off only on token/self's exact answers for that case
// (ErrACLDisabled); then only the broker's own admin token, compared in
// constant time, makes an admin. Rights are cached per token for at most
// 30 s under the token's SHA-256; secrets and their hashes never appear in
// errors or logs.
package acl
