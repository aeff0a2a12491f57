package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/duraton/duraton/sdk"
	"github.com/duraton/duraton/sdk/wire"
)

// fakeDuraton stands in for a Duraton server so the examples run hermetically: it
// answers a publish with one message id and a batch with one per entry.
func fakeDuraton() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		switch {
		case r.URL.Path == "/v2/batch":
			_, _ = io.WriteString(w, `[{"messageId":"msg_trigger"}]`)
		case strings.HasPrefix(r.URL.Path, "/v2/publish/"):
			_, _ = io.WriteString(w, `{"messageId":"msg_1","url":"`+strings.TrimPrefix(r.RequestURI, "/v2/publish/")+`"}`)
		}
	}))
}

func ExampleClient_Publish() {
	srv := fakeDuraton() // in real code: NewClient() reads QSTASH_URL and QSTASH_TOKEN
	defer srv.Close()

	client, err := sdk.NewClient(sdk.WithBaseURL(srv.URL), sdk.WithToken("dev-token"))
	if err != nil {
		panic(err)
	}
	retries := 2
	res, err := client.Publish(context.Background(), sdk.PublishRequest{
		URL:         "https://example.com/hooks/order?id=42",
		Body:        []byte(`{"order":42}`),
		ContentType: "application/json",
		Retries:     &retries,
		Delay:       10 * time.Second,
		FlowControl: &sdk.FlowControl{Key: "vendor-api", Parallelism: 5},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.MessageID, res.URL)
	// Output: msg_1 https://example.com/hooks/order?id=42
}

func ExampleClient_Trigger() {
	srv := fakeDuraton()
	defer srv.Close()

	client, err := sdk.NewClient(sdk.WithBaseURL(srv.URL), sdk.WithToken("dev-token"))
	if err != nil {
		panic(err)
	}
	res, err := client.Trigger(context.Background(), sdk.TriggerRequest{
		URL:      "https://example.com/api/workflow",
		BodyJSON: map[string]string{"user": "ada"},
		RunID:    "signup-ada", // optional; "wfr_" is added
		Labels:   []string{"signup"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.RunID, res.MessageID, res.Deduplicated)
	// Output: wfr_signup-ada msg_trigger false
}

func ExampleReceiver_Verify() {
	// In an endpoint: receiver := sdk.NewReceiverFromEnv(), then
	// body, err := receiver.VerifyRequest(r).
	receiver := &sdk.Receiver{CurrentSigningKey: "sig_current", NextSigningKey: "sig_next"}

	// What Duraton sends: the body and its Upstash-Signature (here made by hand).
	body := []byte(`{"order":42}`)
	claims := wire.NewClaims("https://example.com/hooks/order", body, time.Now(), "jwt_1")
	signature, err := wire.Sign("sig_next", claims) // signed with the next key: after a rotation
	if err != nil {
		panic(err)
	}

	fmt.Println(receiver.Verify(signature, body, "https://example.com/hooks/order"))
	err = receiver.Verify(signature, []byte(`{"order":43}`), "")
	fmt.Println(errors.Is(err, wire.ErrBodyMismatch))
	// Output:
	// <nil>
	// true
}
