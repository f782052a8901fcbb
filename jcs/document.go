package jcs

// DecodeCanonical decodes data as Decode does and appends to dst the
// canonical form of the decoded value without its top-level member omit
// (when the value is an object that has one; "" omits nothing): in one
// read, the value a receiver works on and the bytes a signature over that
// value without omit covers (ARSIA signs the envelope without "security").
//
// When data is already its own canonical form, as a signer's output is,
// the canonical bytes are copied from data; otherwise they are written from
// the decoded value exactly as AppendValue writes them. Either way the
// result equals AppendValue(dst, v with omit removed). On error dst is
// returned unchanged in length.
func (o *Options) DecodeCanonical(dst, data []byte, omit string) (any, []byte, error) {
	maxDepth, maxSize := o.limits()
	if err := checkSize(data, maxSize); err != nil {
		return nil, dst, err
	}
	d := decoders.Get().(*decoder)
	defer d.release()
	v, derr := d.document(o, data, maxDepth, omit)
	if derr != nil {
		return nil, dst, derr
	}
	if !d.canonical {
		m, isObject := v.(map[string]any)
		if _, present := m[omit]; isObject && present && omit != "" {
			rest := make(map[string]any, len(m)-1)
			for k, e := range m {
				if k != omit {
					rest[k] = e
				}
			}
			out, err := o.AppendValue(dst, rest)
			return v, out, err
		}
		out, err := o.AppendValue(dst, v)
		return v, out, err
	}
	switch {
	case d.omitStart < 0:
		return v, append(dst, data...), nil
	case d.rootMembers == 1:
		return v, append(dst, "{}"...), nil
	case d.omitIndex > 0:
		// ...,"omit":value... : drop the comma before it.
		dst = append(dst, data[:d.omitStart-1]...)
		return v, append(dst, data[d.omitEnd:]...), nil
	default:
		// {"omit":value,... : drop the comma after it.
		dst = append(dst, data[:d.omitStart]...)
		return v, append(dst, data[d.omitEnd+1:]...), nil
	}
}
