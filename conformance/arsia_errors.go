package conformance

import (
	"fmt"
	"math"

	"github.com/custos-runtime/custos/arsia"
)

// execErrors runs the errors suite: get_error_info, calculate_retry_delay
// (the Core §11.3 policy, attempts 1-3) and verify_descriptions_english.
func execErrors(_ *arsiaEnv, c *arsiaCase) error {
	switch op := c.operation(""); op {
	case "get_error_info":
		code, _ := c.Input["code"].(string)
		info, err := arsia.ErrorInfoFor(code)
		if done, res := expectRaises(c, err); done {
			return res
		}
		return firstErr(expectEqual(c, "http_status", info.HTTPStatus), expectEqual(c, "retryable", info.Retryable))
	case "calculate_retry_delay":
		attempt, ok := c.Input["attempt"].(int)
		if !ok {
			return fmt.Errorf("%w: input.attempt is not an integer", errUnsupported)
		}
		d, err := arsia.RetryDelay(attempt)
		if done, res := expectRaises(c, err); done {
			return res
		}
		want, ok := c.Expected["delay_seconds"]
		if !ok {
			return nil
		}
		w, isNum := arsiaNumber(want)
		if !isNum {
			return fmt.Errorf("expected.delay_seconds is not a number")
		}
		if got := d.Seconds(); math.Abs(got-w) > 1e-9 {
			return fmt.Errorf("delay_seconds: got %v, want %v", got, w)
		}
		return nil
	case "verify_descriptions_english":
		codes, _ := c.Input["codes"].([]any)
		var errs []string
		for _, v := range codes {
			code, _ := v.(string)
			info, err := arsia.ErrorInfoFor(code)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			if !arsiaEnglishText(info.Description) {
				errs = append(errs, fmt.Sprintf("%s: description %q is not printable ASCII", code, info.Description))
			}
		}
		if len(codes) == 0 {
			errs = append(errs, "no codes to check")
		}
		return expectValidity(c, errs)
	default:
		return fmt.Errorf("%w: errors operation %q", errUnsupported, op)
	}
}

// arsiaEnglishText is the suite's programmatic stand-in for "written in
// English": non-empty printable ASCII.
func arsiaEnglishText(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// arsiaNumber reads a YAML number (int or float64).
func arsiaNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
