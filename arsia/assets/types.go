package assets

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/custos-runtime/custos/arsia/schema"
)

// AssetType is the asset_type of a transfer (§2). It fixes the precision
// of amounts and the format of currency_or_unit.
type AssetType string

// The four asset types; no others exist.
const (
	Currency    AssetType = "currency"     // ISO 4217 fiat currency, 2 decimals
	Token       AssetType = "token"        // application-defined value unit, 8 decimals
	Entitlement AssetType = "entitlement"  // access right or licence, 2 decimals
	ServiceUnit AssetType = "service_unit" // metered service delivery, 4 decimals
)

// AssetTypes returns the four asset types in specification order.
func AssetTypes() []AssetType { return []AssetType{Currency, Token, Entitlement, ServiceUnit} }

// Valid reports whether t is one of the four asset types.
func (t AssetType) Valid() bool {
	_, ok := t.Precision()
	return ok
}

// Precision returns the maximum number of decimal places of an amount of
// this type: currency 2, token 8, entitlement 2, service_unit 4. ok is
// false for an unknown type.
func (t AssetType) Precision() (places int, ok bool) {
	switch t {
	case Currency, Entitlement:
		return 2, true
	case Token:
		return 8, true
	case ServiceUnit:
		return 4, true
	}
	return 0, false
}

// MaxPrecision is the largest precision of any asset type (token, 8): an
// amount whose type is unknown, such as a receipt's, may not exceed it.
const MaxPrecision = 8

// CheckAmount checks that a is a valid amount of type t: strictly positive
// and within the type's precision. The error wraps ErrInvalidAmount or
// ErrPrecision.
func CheckAmount(t AssetType, a Amount) error {
	places, ok := t.Precision()
	switch {
	case !ok:
		return fmt.Errorf("%w: unknown asset_type %q", ErrInvalidAmount, string(t))
	case a.Sign() <= 0:
		return fmt.Errorf("%w: amount must be greater than zero", ErrInvalidAmount)
	case !a.FitsPrecision(places):
		return fmt.Errorf("%w: asset type %s allows at most %d decimal places, %s has %d", ErrPrecision, t, places, a, a.Scale())
	}
	return nil
}

// precisionMessage is the §3.1.1 description of a precision violation.
func precisionMessage(t AssetType, a Amount, places int) string {
	return fmt.Sprintf("amount precision exceeds maximum for asset type %s: %s has %d decimal places, at most %d allowed", t, a, a.Scale(), places)
}

// unitRE is the format of an application-defined unit (§3.1.1).
var unitRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,30}[a-z0-9]$`)

// currencyRE is the shape of an ISO 4217 alphabetic code.
var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// iso4217 is the code list of the asset-transfer-request schema
// ($defs/iso-4217-code/enum), read from the embedded schema file so that
// it follows the protocol's published list.
var iso4217 = sync.OnceValue(func() []string {
	data, ok := schema.File("arsia-asset-transfer-request.schema.json")
	if !ok {
		return nil
	}
	var doc struct {
		Defs struct {
			Code struct {
				Enum []string `json:"enum"`
			} `json:"iso-4217-code"`
		} `json:"$defs"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return nil
	}
	codes := slices.Clone(doc.Defs.Code.Enum)
	slices.Sort(codes)
	return codes
})

// IsISO4217 reports whether code is an ISO 4217 alphabetic currency code
// of the protocol's list: three uppercase ASCII letters, listed. Should the
// list ever be unavailable, every code is refused (fail closed).
func IsISO4217(code string) bool {
	if !currencyRE.MatchString(code) {
		return false
	}
	_, found := slices.BinarySearch(iso4217(), code)
	return found
}

// CheckCurrencyOrUnit checks currency_or_unit against the asset type: an
// uppercase ISO 4217 code for currency; for the other types an
// application-defined identifier of lowercase letters, digits and hyphens
// (2-32 characters) that does not collide with an ISO 4217 code in any
// letter case ("eur" is refused as a token unit: it would read as euros).
// The error wraps ErrCurrencyCode.
func CheckCurrencyOrUnit(t AssetType, s string) error {
	switch {
	case !t.Valid():
		return fmt.Errorf("%w: unknown asset_type %q", ErrCurrencyCode, string(t))
	case t == Currency && !IsISO4217(s):
		return fmt.Errorf("%w: currency_or_unit %q is not an uppercase ISO 4217 alphabetic currency code (e.g. \"EUR\")", ErrCurrencyCode, s)
	case t == Currency:
		return nil
	case !unitRE.MatchString(s):
		return fmt.Errorf("%w: currency_or_unit %q for asset_type %s must be 2-32 lowercase letters, digits or hyphens, starting and ending with a letter or digit", ErrCurrencyCode, s, t)
	case IsISO4217(strings.ToUpper(s)):
		return fmt.Errorf("%w: currency_or_unit %q for asset_type %s collides with the ISO 4217 code %s", ErrCurrencyCode, s, t, strings.ToUpper(s))
	}
	return nil
}
