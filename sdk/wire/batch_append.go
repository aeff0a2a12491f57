package wire

// AppendBatchJSON appends entries as the JSON array of a /v2/batch request, without
// reflection (the Go SDK publishes every step this way). Header order follows the map;
// otherwise it decodes to exactly entries.
func AppendBatchJSON(buf []byte, entries []BatchEntry) []byte {
	buf = append(buf, '[')
	for i, e := range entries {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"destination":`...)
		buf, _ = appendJSONString(buf, e.Destination) // a string always encodes
		if len(e.Headers) > 0 {
			buf = append(buf, `,"headers":{`...)
			first := true
			for k, v := range e.Headers {
				if !first {
					buf = append(buf, ',')
				}
				first = false
				buf, _ = appendJSONString(buf, k)
				buf = append(buf, ':')
				buf, _ = appendJSONString(buf, v)
			}
			buf = append(buf, '}')
		}
		if e.Body != "" {
			buf = append(buf, `,"body":`...)
			buf, _ = appendJSONString(buf, e.Body)
		}
		if e.Queue != "" {
			buf = append(buf, `,"queue":`...)
			buf, _ = appendJSONString(buf, e.Queue)
		}
		buf = append(buf, '}')
	}
	return append(buf, ']')
}
