package wire

import "encoding/base64"

// AppendHistoryEntry appends one element of a workflow delivery's history array (protocol
// §5.3) exactly as CompactJSON encodes a HistoryEntry, {"messageId":…,"body":base64,
// "callType":…}, without building the entry or reflecting over it. A nil body is
// written as "" (the SDK base64-decodes it with atob, which would read null as "null").
func AppendHistoryEntry(buf, messageID, body, callType []byte) []byte {
	buf = append(buf, `{"messageId":`...)
	buf, _ = appendJSONString(buf, messageID) // only the fallback for odd bytes can fail, and it cannot for a []byte
	buf = append(buf, `,"body":"`...)
	buf = base64.StdEncoding.AppendEncode(buf, body)
	buf = append(buf, `","callType":`...)
	buf, _ = appendJSONString(buf, callType)
	return append(buf, '}')
}

// HistoryEntrySize is an upper bound of what AppendHistoryEntry appends for plain ASCII
// ids, to size a buffer once.
func HistoryEntrySize(messageID, body, callType []byte) int {
	return 40 + len(messageID) + len(callType) + base64.StdEncoding.EncodedLen(len(body))
}
