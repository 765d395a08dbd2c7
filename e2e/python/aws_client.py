"""boto3 as the agent runs it, for the e2e suite (sigv4_test.go): its
environment is harness.env (the AWS_* stand-ins, HTTPS_PROXY, the trust
variables) and the endpoints, AWS_ENDPOINT_URL_S3 and
AWS_ENDPOINT_URL_BEDROCK_RUNTIME, which name the bound hosts on the test
upstream's port. It runs the steps argv names and prints one JSON line per
step: {"step", "ok", "status", "body"}.

Steps: invoke (Bedrock InvokeModel, a JSON POST whose body the Custodian
hashes), put and get (S3 PutObject and GetObject), presigned (a presigned
GetObject URL fetched with urllib through HTTPS_PROXY), other-region (S3
signed for eu-west-1, which the Custodian refuses).
"""

import json
import sys
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

BUCKET, KEY, DATA = "e2e-bucket", "dir/object one.txt", b"hello through the custodian"


def s3(region="us-east-1"):
    return boto3.client("s3", region_name=region, config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def step(name, f):
    try:
        status, body = f()
        out = {"step": name, "ok": True, "status": status, "body": body}
    except ClientError as e:
        meta = e.response.get("ResponseMetadata", {})
        out = {"step": name, "ok": False, "status": meta.get("HTTPStatusCode"), "body": str(e)}
    except Exception as e:  # the step's failure is the test's to read
        out = {"step": name, "ok": False, "status": None, "body": type(e).__name__ + ": " + str(e)}
    print(json.dumps(out), flush=True)


def invoke():
    c = boto3.client("bedrock-runtime", region_name="us-east-1", config=Config(retries={"max_attempts": 1}))
    r = c.invoke_model(modelId="anthropic.claude-v2", body=json.dumps({"prompt": "hi"}), contentType="application/json", accept="application/json")
    return r["ResponseMetadata"]["HTTPStatusCode"], r["body"].read().decode()


def put():
    r = s3().put_object(Bucket=BUCKET, Key=KEY, Body=DATA)
    return r["ResponseMetadata"]["HTTPStatusCode"], ""


def get():
    r = s3().get_object(Bucket=BUCKET, Key=KEY)
    return r["ResponseMetadata"]["HTTPStatusCode"], r["Body"].read().decode()


def presigned():
    url = s3().generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": KEY}, ExpiresIn=300)
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read().decode()


def other_region():
    r = s3("eu-west-1").get_object(Bucket=BUCKET, Key=KEY)
    return r["ResponseMetadata"]["HTTPStatusCode"], r["Body"].read().decode()


STEPS = {"invoke": invoke, "put": put, "get": get, "presigned": presigned, "other-region": other_region}

if __name__ == "__main__":
    for name in sys.argv[1:]:
        step(name, STEPS[name])
