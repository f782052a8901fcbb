// Package assets implements ARSIA-Assets, the second A of ARSIA: how
// agents ask each other to move value, and what they must check and record
// when they do.
//
// # What an asset transfer is
//
// ARSIA does not move money. An agent that wants to pay another sends an
// AssetTransferRequest, a signed envelope whose payload.args says who pays
// whom (from_agent, to_agent), how much (amount) of what (currency_or_unit
// and asset_type), under which unique payment_reference, with a mandatory
// idempotency_key so that a retry never pays twice. The receiving agent
// forwards the intent to a licensed payment provider and answers with an
// AssetTransferReceipt (status pending, completed, failed or escrowed). A
// completed transfer can later be undone, fully or partly, with an
// AssetTransferReversal. Every step leaves audit records so that a
// regulator can follow the chain from intent to settlement.
//
// # Amounts
//
// Money is never a float64 here. Amount is an exact decimal parsed from
// the JSON number text (ParseAmount, AmountFromJSON; a float64 coming
// from an already-decoded document is read through its shortest decimal
// form, so 100.50 stays 100.5 and 0.1+0.2 is caught as
// 0.30000000000000004). Each asset type caps the decimals (CheckAmount):
// currency 2, token 8, entitlement 2, service_unit 4. For currency the
// unit is an uppercase ISO 4217 code ("EUR"); other types use a lowercase
// application unit ("api-credits") that must not read as a currency.
//
// # Validating the three messages
//
// ValidateTransferRequest, ValidateTransferReceipt and
// ValidateTransferReversal check a payload against the protocol's JSON
// Schema (package arsia/schema) and then the rules a schema cannot state
// exactly, returning every problem as an *Error that carries the wire code
// to answer with. ValidateTransferRequestMessage adds the envelope-level
// rules, ValidateReceiptMatch ties a receipt to its request, and
// CheckReversalPrecondition decides whether a reversal may proceed: the
// original must be completed, the cumulative reversed amount may not
// exceed it, and a full reversal must come within T+1 of settlement, a
// partial one within T+30.
//
// # Escrow
//
// A request with escrow_conditions asks the provider to hold the value
// until a release_agent sends the release_trigger, or until timeout_at
// (which must be later than the request's ts) returns it to the payer.
// The lifecycle is a small state machine (CanEscrowTransition): ESCROWED
// goes to RELEASED, RETURNED or DISPUTED; a dispute is resolved to
// RELEASED or RETURNED; RELEASED and RETURNED are final. Only a party may
// dispute and only the payer may cancel (AuthorizeEscrowDispute,
// AuthorizeEscrowCancel: anything else is forbidden). BuildEscrowAudit
// writes the audit record of each transition, BuildReversalAudit that of a
// reversal.
//
// # Authorisation and regulation
//
// The seven arsiaprotocol.assets.* capabilities have fixed risk levels
// (CapabilityRiskLevels). From risk 7 a transfer needs a second agent to
// approve it (CheckTwoPartyApproval) and PSD2 strong customer
// authentication (RequiresSCA, ValidateSCAFactors), unless an exemption
// applies (IsSCAExempt: low value up to EUR 30, recurring payments). No
// token may both initiate and approve (ValidateTokenScope: separation of
// duties). Infrastructure failures become DORA incident events
// (ClassifyDORAIncident, BuildDORAIncident); MiFID II records are kept at
// least 1825 days (EnforceMiFIDRetention) in the shape of
// BuildMiFIDAuditRecord.
//
// Nothing in this package reads the clock: every time-dependent check
// takes the current time from its caller. Validators never panic and fail
// closed: what cannot be verified is reported as a problem.
//
// # Where Custos uses it
//
// Today only the ARSIA conformance run (package conformance, custos
// conformance arsia) uses this package: custos serve does not serve asset transfers
// yet. It is a complete library of the module, checked against the
// upstream suite, waiting for the gateway to offer it.
package assets
