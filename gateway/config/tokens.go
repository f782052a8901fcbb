package config

// Tokens says which access tokens the inbox demands.
type Tokens struct{}

// check returns what is wrong with t.
func (t *Tokens) check() []error { return nil }
