package config

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// fill sets every field reachable from v (one element in every list and
// map of sections) to a marker: secret fields to a value containing
// "S3CRET", the others to "visible".
func fill(v reflect.Value, secret string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), secret)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[MinTrustLevel]() {
			return // levels, not strings
		}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if yamlKey(f) != "" {
				fill(v.Field(i), f.Tag.Get("secret"))
			}
		}
	case reflect.String:
		v.SetString(marker(secret))
	case reflect.Slice:
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, secret)
		v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
	case reflect.Map:
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, secret)
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf("k").Convert(v.Type().Key()), e)
		v.Set(m)
	}
}

func marker(secret string) string {
	switch secret {
	case "":
		return "visible"
	case "url":
		return "postgres://user:S3CRET@db.internal/custos?token=S3CRET"
	case "env":
		return "API_KEY=S3CRET"
	}
	return "S3CRET"
}

// TestEffectiveRedactsEverySecret fills every field tagged secret, over
// the whole Config by reflection, so that a new secret field is covered
// as soon as it is tagged.
func TestEffectiveRedactsEverySecret(t *testing.T) {
	var c Config
	fill(reflect.ValueOf(&c).Elem(), "")
	out, err := c.Effective()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "S3CRET") {
		t.Fatalf("a secret is printed:\n%s", out)
	}
	if !strings.Contains(string(out), "visible") || !strings.Contains(string(out), Redacted) ||
		!strings.Contains(string(out), "postgres://user:"+Redacted+"@db.internal") || !strings.Contains(string(out), "API_KEY="+Redacted) {
		t.Fatalf("the output lost the settings or the redaction marks:\n%s", out)
	}
	var back map[string]any
	if err := yaml.Unmarshal(out, &back); err != nil {
		t.Fatalf("not YAML: %v", err)
	}
}

// TestSecretLookingFieldsAreTagged fails when a field whose name says it
// holds a credential is not tagged secret (and so would be printed by
// custos serve --check-config), unless it is listed here as known not to.
func TestSecretLookingFieldsAreTagged(t *testing.T) {
	looksSecret := regexp.MustCompile(`(?i)secret|token|password|headers|credential|env$|dsn|store|audit_log|^url$`)
	notSecret := map[string]bool{
		"Config.tokens":           true, // the section of token settings
		"Tokens.token_algorithms": true,
		// Durations, not tokens.
		"AuthorizationServer.token_lifetime":     true,
		"AuthorizationServer.max_token_lifetime": true,
		"SlackChannel.api":                       false,
	}
	var walk func(t reflect.Type, seen map[reflect.Type]bool)
	var missing []string
	walk = func(typ reflect.Type, seen map[reflect.Type]bool) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ.PkgPath() != reflect.TypeFor[Config]().PkgPath() {
			return
		}
		seen[typ] = true
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			key := yamlKey(f)
			if key == "" {
				continue
			}
			name := typ.Name() + "." + key
			if looksSecret.MatchString(key) && f.Tag.Get("secret") == "" && !notSecret[name] {
				missing = append(missing, name)
			}
			walk(f.Type, seen)
		}
	}
	walk(reflect.TypeFor[Config](), map[reflect.Type]bool{})
	// Handler.url and the peers' URLs name endpoints, not credentials.
	allowed := map[string]bool{"Handler.url": true, "TrustPeer.url": true}
	var bad []string
	for _, m := range missing {
		if !allowed[m] {
			bad = append(bad, m)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("fields that look secret but are not tagged secret: %v", bad)
	}
}

func TestRedactString(t *testing.T) {
	for _, tc := range []struct{ in, how, want string }{
		{"env:SLACK_TOKEN", "true", "env:SLACK_TOKEN"},
		{"file:/run/secrets/x", "true", "file:/run/secrets/x"},
		{"xoxb-1", "true", Redacted},
		{"", "true", ""},
		{"/var/lib/custos/custos.db", "url", "/var/lib/custos/custos.db"},
		{"postgres://custos@db/custos", "url", "postgres://custos@db/custos"},
		{"postgres://custos:pw@db/custos?sslmode=disable", "url", "postgres://custos:" + Redacted + "@db/custos?sslmode=" + Redacted},
		{"PATH=/usr/bin", "env", "PATH=" + Redacted},
		{"garbage", "env", Redacted},
	} {
		if got := redactString(tc.in, tc.how); got != tc.want {
			t.Errorf("redactString(%q, %s) = %q, want %q", tc.in, tc.how, got, tc.want)
		}
	}
}

// TestEveryLeafSettingHasAnEnvironmentVariable sets each setting reachable
// through the sections by its CUSTOS_ variable and reads it back.
func TestEveryLeafSettingHasAnEnvironmentVariable(t *testing.T) {
	var count int
	var walk func(typ reflect.Type, path []string)
	walk = func(typ reflect.Type, path []string) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			key := yamlKey(f)
			if key == "" {
				continue
			}
			p := append(append([]string(nil), path...), key)
			if f.Type.Kind() == reflect.Struct && !isLeafStruct(f.Type) && f.Type != reflect.TypeFor[MinTrustLevel]() {
				walk(f.Type, p)
				continue
			}
			value, check := envSample(f.Type)
			if value == "" {
				continue
			}
			count++
			c := Default()
			name := EnvName(p...)
			if err := c.ApplyEnviron([]string{name + "=" + value}); err != nil {
				t.Errorf("%s=%s: %v", name, value, err)
				continue
			}
			got := reflect.ValueOf(c)
			for _, k := range p {
				ft, _ := fieldByKey(got.Type(), k)
				got = got.FieldByIndex(ft.Index)
			}
			if !check(got) {
				t.Errorf("%s=%s: the setting is %v", name, value, got)
			}
		}
	}
	walk(reflect.TypeFor[Config](), nil)
	if count < 60 {
		t.Fatalf("only %d settings checked", count)
	}
}

// envSample is a value of type t as an environment variable, and a check
// that it arrived ("" for types the walk does not sample).
func envSample(t reflect.Type) (string, func(reflect.Value) bool) {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "7s", func(v reflect.Value) bool { return v.Interface() == 7*time.Second }
	case t == reflect.TypeFor[MinTrustLevel]():
		return "L2", func(v reflect.Value) bool { return v.Interface().(MinTrustLevel).Default.String() == "L2" }
	case t.Kind() == reflect.String:
		return "a: b", func(v reflect.Value) bool { return v.String() == "a: b" }
	case t.Kind() == reflect.Bool:
		return "true", func(v reflect.Value) bool { return v.Bool() }
	case t.Kind() == reflect.Int, t.Kind() == reflect.Int64:
		return "3", func(v reflect.Value) bool { return v.Int() == 3 }
	case t.Kind() == reflect.Float64:
		return "2.5", func(v reflect.Value) bool { return v.Float() == 2.5 }
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Float64:
		return "0.5", func(v reflect.Value) bool { return !v.IsNil() && v.Elem().Float() == 0.5 }
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "[a, b]", func(v reflect.Value) bool { return v.Len() == 2 && v.Index(1).String() == "b" }
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.String:
		return "{k: v}", func(v reflect.Value) bool { return v.MapIndex(reflect.ValueOf("k")).String() == "v" }
	case t.Kind() == reflect.Slice, t.Kind() == reflect.Map:
		// Lists and maps of sections: one entry with one key.
		if t.Kind() == reflect.Slice {
			return "[{}]", func(v reflect.Value) bool { return v.Len() == 1 }
		}
		return "{x: {}}", func(v reflect.Value) bool { return v.Len() >= 1 }
	}
	return "", nil
}
