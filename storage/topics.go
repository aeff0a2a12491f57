package storage

const bucketTopics = "topics"

// Topic is a URL group: a name that fans a publication out to its endpoints, one message
// per endpoint. Times are unix milliseconds.
type Topic struct {
	Name      string          `json:"name"`
	CreatedAt int64           `json:"createdAt"`
	UpdatedAt int64           `json:"updatedAt"`
	Endpoints []TopicEndpoint `json:"endpoints"`
}

// TopicEndpoint is one destination of a URL group; Name is optional.
type TopicEndpoint struct {
	Name string `json:"name,omitempty"`
	URL  string `json:"url"`
}

// PutTopic creates or replaces a URL group.
func (t *Tx) PutTopic(project string, tp *Topic) error {
	return t.putRecord(project, bucketTopics, tp.Name, tp)
}

// Topic reads a URL group.
func (t *Tx) Topic(project, name string) (*Topic, error) {
	return getRecord[Topic](t.bucket(project, bucketTopics), name)
}

// DeleteTopic removes a URL group; ErrNotFound when absent.
func (t *Tx) DeleteTopic(project, name string) error {
	return deleteRecord(t.bucket(project, bucketTopics), name)
}

// TopicCount is the number of a project's URL groups.
func (t *Tx) TopicCount(project string) int {
	return countRecords(t.bucket(project, bucketTopics))
}

// Topics lists a project's URL groups by name.
func (t *Tx) Topics(project string) ([]Topic, error) {
	return listRecords[Topic](t.bucket(project, bucketTopics), "topic")
}
