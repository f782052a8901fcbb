// Package compliance implements ARSIA compliance profiles: the named
// regulatory profiles (GDPR-STANDARD, EU-AI-ACT-HIGH-RISK, MIFID-II, DORA,
// ...) whose defaults an ARSIA envelope's compliance object inherits, and
// the rules senders and receivers apply to that object (ARSIA-Core §4.3.7
// and §4.3.8).
//
// The package works on the generic decoded envelope (map[string]any, with
// numbers as json.Number, float64 or Go integers) and does not import the
// envelope package: receivers run these rules on messages that may not have
// passed structural (L1) validation, and no input makes them panic.
//
// # Profiles
//
// Default returns the registry of the seven profiles bundled with ARSIA 1.0
// (the Apache-2.0 file arsia-compliance-profiles.json, embedded). Load reads
// a custom profiles file of the same format. Registries are read-only.
//
// # Sender side: inheritance
//
// Apply fills the compliance object's absent or null fields: per-message
// values win over the declared profile's defaults, which win over
// GDPR-STANDARD's when no profile is declared; an envelope without a
// compliance object is left alone. A retention_days below the profile's is
// raised to it, and pii_involved=true forces audit_required=true. Apply
// returns its warnings instead of logging them and never modifies its input.
//
// # Receiver side: rules R1–R7
//
// Validate returns the Violations of rules R1 (unknown profile, strict
// only), R2 (personal data without legal basis), R3 (high-risk without
// human oversight), R7 (high-risk without profile), R4 (retention below the
// profile's floor, on the raw value), R5 (malformed data residency) and R6
// (per-message classification above the agent's), in that order.
//
// # Related checks
//
// ClockSkew gives the profile's timestamp tolerance, CheckOversightTimeout
// flags overdue human reviews, ValidateExplainability checks a response's
// explanation against its request, and NewAuditRecord builds the audit
// record of an envelope.
package compliance
