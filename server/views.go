package server

import (
	"strings"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/sdk/wire"
)

// The QStash API's JSON is the protocol's own (package wire, which the SDK decodes with);
// these functions fill it from the engine's records.

func toMessageView(m *delivery.Message) wire.Message {
	v := wire.Message{
		MessageID: m.ID, URL: m.URL, Method: m.Method, Header: redactHeader(m.Header, m.Redact),
		MaxRetries: m.Retries, Retried: m.Retried, RetryDelayExpression: m.RetryDelay, Timeout: m.TimeoutMs / 1000,
		NotBefore: m.NotBefore, CreatedAt: m.CreatedAt, State: m.State, QueueName: m.Queue,
		Label: strings.Join(m.Labels, ","), Labels: m.Labels, CallerIP: m.CallerIP, ScheduleID: m.ScheduleID,
		TopicName: m.TopicName, EndpointName: m.EndpointName,
	}
	v.Body, v.BodyBase64 = wire.BodyFields(redactBody(m.Body, m.Redact))
	if m.Callback != nil {
		v.Callback = m.Callback.URL
	}
	if m.FailureCallback != nil {
		v.FailureCallback = m.FailureCallback.URL
	}
	if fc := m.FlowControl; fc != nil {
		v.FlowControlKey, v.Parallelism, v.Rate, v.Period = fc.Key, fc.Parallelism, fc.Rate, int64(fc.Period.Seconds())
	}
	return v
}

func toLogView(ev *delivery.LogEvent) wire.Log {
	v := wire.Log{
		Time: ev.Time, State: ev.State, MessageID: ev.MessageID, URL: ev.URL, QueueName: ev.Queue,
		Label: strings.Join(ev.Labels, ","), Labels: ev.Labels, ScheduleID: ev.ScheduleID, Error: ev.Error,
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
