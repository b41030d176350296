import{b as t}from"./index-DkPnntgG.js";function r(){return t("p",{class:"lead",children:"Not built yet."})}export{r as NewApp};
