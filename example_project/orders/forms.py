from django import forms

ITEMS = ["Coffee beans (1 kg)", "Espresso cups (set of 4)", "Milk frother", "Descaling tablets"]


class OrderForm(forms.Form):
    customer_email = forms.EmailField(label="Email", initial="ada@example.com")
    item = forms.ChoiceField(choices=[(i, i) for i in ITEMS])
    quantity = forms.IntegerField(min_value=1, max_value=99, initial=1)
    fail_after_enqueue = forms.BooleanField(
        required=False,
        label="fail after enqueue",
        help_text="Raise an error inside the transaction after the jobs were enqueued: "
        "the order is rolled back and no job reaches Redis.",
    )


SAMPLE_IMPORT = """grace@example.com,Coffee beans (1 kg),2
alan@example.com,Milk frother,1
not an email,Espresso cups (set of 4),1
linus@example.com,Descaling tablets,3"""


class ImportForm(forms.Form):
    lines = forms.CharField(
        label="Orders to import",
        widget=forms.Textarea(attrs={"rows": 5, "cols": 60}),
        initial=SAMPLE_IMPORT,
        help_text="One order a line: email,item,quantity. The third sample line is invalid on purpose.",
    )
    notify = forms.EmailField(label="Email the summary to", initial="ops@example.com")
