package server

import (
	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// The QStash API's JSON is the protocol's own (package wire, which the SDK decodes with);
// these functions fill it from the engine's records.

func toMessageView(m *delivery.Message) wire.Message {
	v := wire.Message{
		MessageID: m.ID, URL: m.URL, Method: m.Method, Header: redactHeader(m.Header, delivery.ViewRedaction(m)),
		MaxRetries: m.Retries, Retried: m.Retried, RetryDelayExpression: m.RetryDelay, Timeout: m.TimeoutMs / 1000,
		NotBefore: m.NotBefore, CreatedAt: m.CreatedAt, State: m.State, QueueName: m.Queue,
		Label: firstLabel(m.Labels), Labels: m.Labels, CallerIP: m.CallerIP, ScheduleID: m.ScheduleID,
		TopicName: m.TopicName, EndpointName: m.EndpointName,
	}
	v.Body, v.BodyBase64 = wire.BodyFields(redactBody(m.Body, m.Redact))
	v.Callback, v.FailureCallback = callbackURLs(m)
	v.FlowControlKey, v.Parallelism, v.Rate, v.Period = flowFields(m)
	return v
}

// callbackURLs are a message's callback and failure-callback URLs ("" when none), as
// messages and schedules show them.
func callbackURLs(m *delivery.Message) (callback, failure string) {
	if m.Callback != nil {
		callback = m.Callback.URL
	}
	if m.FailureCallback != nil {
		failure = m.FailureCallback.URL
	}
	return callback, failure
}

// flowFields are a message's flow-control key and limits (period in seconds), as messages
// and schedules show them.
func flowFields(m *delivery.Message) (key string, parallelism, rate int, period int64) {
	if fc := m.FlowControl; fc != nil {
		return fc.Key, fc.Parallelism, fc.Rate, int64(fc.Period.Seconds())
	}
	return "", 0, 0, 0
}

func toLogView(ev *delivery.LogEvent) wire.Log {
	v := wire.Log{
		Time: ev.Time, State: ev.State, MessageID: ev.MessageID, URL: ev.URL, QueueName: ev.Queue,
		Label: firstLabel(ev.Labels), Labels: ev.Labels, ScheduleID: ev.ScheduleID, Error: ev.Error,
		TopicName: ev.TopicName, EndpointName: ev.EndpointName,
		NextDeliveryTime: ev.NextDeliveryTime, ResponseStatus: ev.ResponseStatus,
		ResponseHeader: ev.ResponseHeader, Retried: ev.Retried,
	}
	v.ResponseBody, v.ResponseBodyBase64 = wire.BodyFields(ev.ResponseBody)
	return v
}

// toDLQView is a dead letter: the message plus the last answer.
func toDLQView(d *delivery.DLQEntry) wire.DLQMessage {
	v := wire.DLQMessage{
		Message: toMessageView(&d.Message), DLQID: d.DLQID, FailedAt: d.FailedAt,
		ResponseStatus: d.Response.Status, ResponseHeader: d.Response.Header, Error: d.Response.Error,
	}
	v.ResponseBody, v.ResponseBodyBase64 = wire.BodyFields(d.Response.Body)
	return v
}

// firstLabel is a record's legacy "label": its first label, as QStash shows it (the SDK's
// own tests read it so); "labels" lists them all.
func firstLabel(labels []string) string {
	if len(labels) == 0 {
		return ""
	}
	return labels[0]
}
