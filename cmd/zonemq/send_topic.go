package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
)

// checkSendTopic looks the topic up before the first send. A topic no name
// server routes would be created by the broker's auto-create on the first
// send, so a typo (`--topic Dmeo`) quietly makes a topic no consumer reads:
// with --no-create that is refused, without it the CLI says so (and names
// an existing topic the name is close to).
func checkSendTopic(ctx context.Context, cfg client.ClientConfig, topic string, noCreate bool, stderr io.Writer) error {
	a, err := admin.New(admin.Config{ClientConfig: cfg})
	if err != nil {
		return clientError(err)
	}
	if err := a.Start(ctx); err != nil {
		return startError("the route lookup", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Shutdown(sctx)
	}()
	_, err = a.TopicRoute(ctx, topic)
	if err == nil {
		return nil
	}
	if !errors.Is(err, &client.ResponseError{Code: client.CodeTopicNotExist}) {
		return nil // the send itself will report what is wrong
	}
	hint := ""
	if topics, err := a.TopicList(ctx); err == nil {
		if near := nearestTopic(topic, topics); near != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", near)
		}
	}
	if noCreate {
		return fmt.Errorf("topic %s does not exist%s; --no-create refuses to create it (zonemq admin topic create --topic %s makes it)", topic, hint, topic)
	}
	fmt.Fprintf(stderr, "zonemq send: topic %s does not exist yet%s: the broker creates it on the first send; --no-create refuses instead\n", topic, hint)
	return nil
}

// nearestTopic is the application topic within two edits of name, if one
// is; system topics are never suggested.
func nearestTopic(name string, topics []string) string {
	best, bestD := "", 3
	for _, t := range topics {
		if t == name || internalTopic(t) {
			continue
		}
		if d := editDistance(name, t); d < bestD {
			best, bestD = t, d
		}
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (adjacent swaps count
// one edit, as a typo does) between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
