package server

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"

	"github.com/duraton/duraton/delivery"
)

// messageView is a message as the QStash API shows it.
type messageView struct {
	MessageID       string              `json:"messageId"`
	URL             string              `json:"url"`
	Method          string              `json:"method"`
	Header          map[string][]string `json:"header,omitempty"`
	Body            string              `json:"body,omitempty"`
	BodyBase64      string              `json:"bodyBase64,omitempty"`
	MaxRetries      int                 `json:"maxRetries"`
	Retried         int                 `json:"retried"`
	RetryDelay      string              `json:"retryDelayExpression,omitempty"`
	Timeout         int64               `json:"timeout,omitempty"`
	NotBefore       int64               `json:"notBefore"`
	CreatedAt       int64               `json:"createdAt"`
	State           string              `json:"state"`
	Callback        string              `json:"callback,omitempty"`
	FailureCallback string              `json:"failureCallback,omitempty"`
	QueueName       string              `json:"queueName,omitempty"`
	Label           string              `json:"label,omitempty"`
	Labels          []string            `json:"labels,omitempty"`
	CallerIP        string              `json:"callerIP,omitempty"`
	ScheduleID      string              `json:"scheduleId,omitempty"`
	TopicName       string              `json:"topicName,omitempty"`
	EndpointName    string              `json:"endpointName,omitempty"`
	FlowControlKey  string              `json:"flowControlKey,omitempty"`
	Parallelism     int                 `json:"parallelism,omitempty"`
	Rate            int                 `json:"rate,omitempty"`
	Period          int64               `json:"period,omitempty"`
	// Waiting says why a due message has not started (flow control), and since when.
	Waiting *waitingView `json:"waiting,omitempty"`
}

// waitingView explains a delivery held in a flow-control waitlist.
type waitingView struct {
	Reason string `json:"reason"`
	Since  int64  `json:"since"`
}

func toMessageView(m *delivery.Message) messageView {
	v := messageView{
		MessageID: m.ID, URL: m.URL, Method: m.Method, Header: redactHeader(m.Header, m.Redact),
		MaxRetries: m.Retries, Retried: m.Retried, RetryDelay: m.RetryDelay, Timeout: m.TimeoutMs / 1000,
		NotBefore: m.NotBefore, CreatedAt: m.CreatedAt, State: m.State, QueueName: m.Queue,
		Label: strings.Join(m.Labels, ","), Labels: m.Labels, CallerIP: m.CallerIP, ScheduleID: m.ScheduleID,
		TopicName: m.TopicName, EndpointName: m.EndpointName,
	}
	v.Body, v.BodyBase64 = bodyFields(redactBody(m.Body, m.Redact))
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

// bodyFields shows a body as text when it is UTF-8, else as base64.
func bodyFields(b []byte) (text, b64 string) {
	if len(b) == 0 {
		return "", ""
	}
	if utf8.Valid(b) {
		return string(b), ""
	}
	return "", base64.StdEncoding.EncodeToString(b)
}

// logView is one log event as the QStash API shows it.
type logView struct {
	Time             int64               `json:"time"`
	State            string              `json:"state"`
	MessageID        string              `json:"messageId"`
	URL              string              `json:"url"`
	QueueName        string              `json:"queueName,omitempty"`
	Label            string              `json:"label,omitempty"`
	Labels           []string            `json:"labels,omitempty"`
	ScheduleID       string              `json:"scheduleId,omitempty"`
	TopicName        string              `json:"topicName,omitempty"`
	EndpointName     string              `json:"endpointName,omitempty"`
	Error            string              `json:"error,omitempty"`
	NextDeliveryTime int64               `json:"nextDeliveryTime,omitempty"`
	ResponseStatus   int                 `json:"responseStatus,omitempty"`
	ResponseHeader   map[string][]string `json:"responseHeader,omitempty"`
	ResponseBody     string              `json:"responseBody,omitempty"`
	ResponseBodyB64  string              `json:"responseBodyBase64,omitempty"`
	Retried          int                 `json:"retried"`
}

func toLogView(ev *delivery.LogEvent) logView {
	v := logView{
		Time: ev.Time, State: ev.State, MessageID: ev.MessageID, URL: ev.URL, QueueName: ev.Queue,
		Label: strings.Join(ev.Labels, ","), Labels: ev.Labels, ScheduleID: ev.ScheduleID, Error: ev.Error,
		TopicName: ev.TopicName, EndpointName: ev.EndpointName,
		NextDeliveryTime: ev.NextDeliveryTime, ResponseStatus: ev.ResponseStatus,
		ResponseHeader: ev.ResponseHeader, Retried: ev.Retried,
	}
	v.ResponseBody, v.ResponseBodyB64 = bodyFields(ev.ResponseBody)
	return v
}

// dlqView is a dead letter as the QStash API shows it: the message plus the last answer.
type dlqView struct {
	messageView
	DLQID              string              `json:"dlqId"`
	FailedAt           int64               `json:"failedAt"`
	ResponseStatus     int                 `json:"responseStatus"`
	ResponseHeader     map[string][]string `json:"responseHeader,omitempty"`
	ResponseBody       string              `json:"responseBody,omitempty"`
	ResponseBodyBase64 string              `json:"responseBodyBase64,omitempty"`
	Error              string              `json:"error,omitempty"`
}

func toDLQView(d *delivery.DLQEntry) dlqView {
	v := dlqView{
		messageView: toMessageView(&d.Message), DLQID: d.DLQID, FailedAt: d.FailedAt,
		ResponseStatus: d.Response.Status, ResponseHeader: d.Response.Header, Error: d.Response.Error,
	}
	v.ResponseBody, v.ResponseBodyBase64 = bodyFields(d.Response.Body)
	return v
}
