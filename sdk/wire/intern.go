package wire

import "net/http"

// internedHeaderString returns a shared string for the header names and constant values
// that every step publish and trigger of the SDKs carries in a /v2/batch entry (the names
// lower-cased, as the SDKs send them), so that decoding a batch does not allocate a copy
// of each. Anything else is not interned (ok false) and is copied as before.
func internedHeaderString(b []byte) (s string, ok bool) {
	switch string(b) { // compiled without converting b
	case "upstash-workflow-init":
		return "upstash-workflow-init", true
	case "upstash-workflow-runid":
		return "upstash-workflow-runid", true
	case "upstash-workflow-url":
		return "upstash-workflow-url", true
	case "upstash-workflow-sdk-version":
		return "upstash-workflow-sdk-version", true
	case "upstash-forward-upstash-workflow-sdk-version":
		return "upstash-forward-upstash-workflow-sdk-version", true
	case "upstash-feature-set":
		return "upstash-feature-set", true
	case "upstash-method":
		return "upstash-method", true
	case "content-type":
		return "content-type", true
	case "upstash-workflow-calltype":
		return "upstash-workflow-calltype", true
	case "upstash-failure-callback":
		return "upstash-failure-callback", true
	case "upstash-failure-callback-forward-upstash-workflow-is-failure":
		return "upstash-failure-callback-forward-upstash-workflow-is-failure", true
	case "upstash-failure-callback-forward-upstash-workflow-failure-callback":
		return "upstash-failure-callback-forward-upstash-workflow-failure-callback", true
	case "upstash-failure-callback-workflow-runid":
		return "upstash-failure-callback-workflow-runid", true
	case "upstash-failure-callback-workflow-init":
		return "upstash-failure-callback-workflow-init", true
	case "upstash-failure-callback-workflow-url":
		return "upstash-failure-callback-workflow-url", true
	case "upstash-failure-callback-workflow-calltype":
		return "upstash-failure-callback-workflow-calltype", true
	case "upstash-failure-callback-feature-set":
		return "upstash-failure-callback-feature-set", true
	case "true":
		return "true", true
	case "false":
		return "false", true
	case SdkVersion:
		return SdkVersion, true
	case FeatureSet:
		return FeatureSet, true
	case http.MethodPost:
		return http.MethodPost, true
	case "application/json":
		return "application/json", true
	case CallTypeStep:
		return CallTypeStep, true
	case CallTypeFailure:
		return CallTypeFailure, true
	}
	return "", false
}
