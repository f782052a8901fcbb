// Package limits defines, once, the sizes that more than one package of
// Custos enforces, so that what the inbox accepts, what the envelope parser
// reads and what the verifier checks cannot drift apart.
//
// A limit used by one package only stays in that package, next to the code
// it guards.
package limits

const (
	// MessageBytes is the largest ARSIA message, in bytes of its UTF-8 wire
	// JSON: the ARSIA default max_message_bytes (Core §4), 1 MiB. The
	// envelope parser, the signature verifier and the HTTP inbox enforce it,
	// and the gateway's max_body defaults to it.
	MessageBytes = 1 << 20

	// ArgumentsBytes is the largest arguments object an action hands to a
	// handler. The arguments travel inside a message, so they cannot be
	// larger than one.
	ArgumentsBytes = MessageBytes

	// FileBytes is the largest configuration, policy, key or certificate
	// file Custos reads: a larger one is refused, not truncated.
	FileBytes = 1 << 20
)
