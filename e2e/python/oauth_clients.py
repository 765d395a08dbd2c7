"""The suite's real OAuth clients, run by the venv of make's .cache/python-oauth.

argv[1] is a JSON file (0600, written by the test: the credentials never
ride argv) naming the client and what it needs; the token the endpoint
issued is printed alone on stdout. requests reads REQUESTS_CA_BUNDLE, the
roots of the test's token endpoint.

  google:             google-auth's service_account.Credentials from the
                      key (its token_uri the test's endpoint), refreshed:
                      the JWT bearer grant as Google's own library signs it.
  client-credentials: requests-oauthlib's OAuth2Session with oauthlib's
                      BackendApplicationClient (RFC 6749 section 4.4), the
                      client authenticated by Basic.
"""
import json
import sys


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    if spec["client"] == "google":
        import google.auth.transport.requests
        from google.oauth2 import service_account

        creds = service_account.Credentials.from_service_account_info(spec["key"], scopes=spec["scopes"])
        creds.refresh(google.auth.transport.requests.Request())
        print(creds.token)
    elif spec["client"] == "client-credentials":
        from oauthlib.oauth2 import BackendApplicationClient
        from requests_oauthlib import OAuth2Session

        s = OAuth2Session(client=BackendApplicationClient(client_id=spec["client_id"]), scope=spec["scopes"])
        tok = s.fetch_token(token_url=spec["token_url"], client_id=spec["client_id"], client_secret=spec["client_secret"], scope=spec["scopes"])
        print(tok["access_token"])
    else:
        sys.exit("unknown client " + spec["client"])


if __name__ == "__main__":
    main()
