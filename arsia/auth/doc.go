// Package auth authorizes ARSIA requests: it validates the OAuth 2.0
// access tokens (JWTs) that accompany them and the DPoP proofs (RFC 9449)
// that bind a token to the sender's key (ARSIA-Core §6,
// ARSIA-Identity §3).
//
// An ARSIA request arrives with "Authorization: Bearer <token>", or with
// "Authorization: DPoP <token>" and a "DPoP: <proof>" header. The receiver
// checks, in this order:
//
//	claims, errs := auth.ValidateAccessToken(ctx, token, issuerKeys, auth.TokenOptions{
//		Now:              now,
//		ExpectedSubject:  env.From,         // the token was issued to the sender
//		ExpectedAudience: env.To,           // ...for this recipient
//		RequiredScope:    env.Capabilities, // ...and grants what is asked
//	})
//	// Bearer: auth.CheckBearer(claims) refuses a DPoP-bound token.
//	// DPoP:
//	proof, errs := auth.ValidateDPoP(ctx, proofHeader, auth.DPoPOptions{
//		Method: r.Method, URL: inboxURL, AccessToken: token, Now: now, Replay: cache,
//	})
//	err := auth.VerifyDPoPBinding(claims, proof)
//
// and answers any failure with auth.ArsiaError(errs...): "unauthorized"
// without detail, or "forbidden" with the required and provided
// capabilities when the only problem is the token's scope.
//
// # Design
//
// Every check takes an algorithm allow-list whose default is EdDSA; "none"
// and HMAC algorithms are never accepted, and the key must match the
// algorithm, so a token cannot pick its own verification method. Decoding
// (strict: size capped at MaxJWTBytes, unpadded base64url, duplicate JSON
// member names refused) is separate from verification, and once a JWT is
// decoded all its problems are reported together, with the reference SDK's
// wording ("token is missing required claim 'jti'", "DPoP iat is too old").
// Nothing reads the clock: Now is an option. Options that would skip a
// check are named ...Insecure. Scope matching is exact; wildcards are for
// capability policies, not tokens (CheckScopeCoverage).
//
// Replay protection is a ReplayCache, consulted with a context because a
// shared implementation does I/O. MemoryReplayCache is bounded and refuses
// proofs when full rather than forgetting a jti.
//
// IssueAccessToken and NewDPoPProof make tokens and proofs for tests and
// tooling; Thumbprint computes the RFC 7638 JWK thumbprint that cnf.jkt
// carries.
//
// # Errors
//
// Every error wraps a sentinel (ErrExpired, ErrBadSignature, ErrReplay,
// ...); insufficient scope is a *ScopeError. Error texts may quote the
// token and are for local logs; ArsiaError produces what may be sent.
package auth
