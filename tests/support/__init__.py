"""What the tests share: builders of agreements and messages, the store helpers, the endpoint under
test, access to ../shared."""
